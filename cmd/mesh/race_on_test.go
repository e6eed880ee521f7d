//go:build race

package main

// raceDetector is true in a build with the race detector, which makes
// every agent several times slower.
const raceDetector = true
