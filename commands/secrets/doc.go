// Package secrets keeps the salts that secret settings are sealed under
// (rule 21), in a stream of their own, and seals, opens and prints those
// settings for an assignment and a composition. It knows nothing of the
// verbs: forgetting a secret and rotating a credential (package
// credentials) and composing a node (package world) use it through a
// *Store, which is nil when a controller has no secrets stream (every use
// then answers ErrNone).
package secrets
