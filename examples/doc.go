// Package examples holds example module manifests (postgres.json, a provider;
// app.json, a consumer that receives its provider's node and port; backup.json,
// a consumer that chooses every postgres, as a list; greeter.json,
// which installs and runs mesh-greeter from an artifact, with an HTTP health
// check on a port that is a setting (its env and probe are templates), so
// two nodes on one machine each have their own; visitor.json, a consumer of
// its greeting; wireguard.json, the overlay's config; builder.json, which
// claims a seat; motd.json; tmpclean.json, a systemd unit), used by the
// README walkthrough and by the tests, which hold them valid.
package examples
