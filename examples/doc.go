// Package examples holds example module manifests (postgres.json, a provider;
// app.json, a consumer that receives its provider's node and port; backup.json,
// a consumer that chooses every postgres, as a list; greeter.json,
// which runs; visitor.json, a consumer of its greeting), used by
// the README walkthrough and by the tests, which hold them valid.
package examples
