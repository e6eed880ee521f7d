// Package examples holds example module manifests (postgres.json, a provider;
// app.json, a consumer that receives its provider's node and port), used by
// the README walkthrough and by the tests, which hold them valid.
package examples
