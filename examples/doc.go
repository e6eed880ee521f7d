// Package examples holds example module manifests (postgres.json, a provider;
// app.json, a consumer that receives its provider's node and port; backup.json,
// a consumer that chooses every postgres, as a list; greeter.json,
// which runs, with an HTTP health check, and greeter-2.json, its next build
// (another default greeting), which the README rolls out; visitor.json, a consumer of its greeting), used by
// the README walkthrough and by the tests, which hold them valid.
package examples
