// Package events holds what the mesh records: one Go type per event, the
// envelope every event travels in, the table that turns stored bytes back into
// types (with an upcaster per version), the subject scheme, and the rule for
// names that become subject tokens.
//
// It imports neither NATS nor Pebble (a test holds that): the vocabulary of the
// log must not depend on where the log is kept. The JetStream store that appends
// and reads these events lives in events/store.
package events
