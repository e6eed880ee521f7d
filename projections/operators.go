package projections

import (
	"github.com/cockroachdb/pebble/v2"
	"github.com/meshctl/mesh/events"
	"github.com/meshctl/mesh/wire"
)

// Operator is one operator's row (issue 33).
type Operator = wire.Operator

func operatorKey(name string) []byte { return append([]byte{prefixOperator}, name...) }

// foldOperators keeps each operator: its role and key, who added it and,
// once removed, who removed it. A removed name added again is a new row
// over the old, with the aggregate's version carried on.
func foldOperators(b *pebble.Batch, rec events.Recorded) error {
	switch ev := rec.Event.(type) {
	case events.OperatorAdded:
		return putJSON(b, operatorKey(ev.Name), Operator{OperatorAdded: ev, AddedAt: rec.Envelope.OccurredAt,
			AddedBy: rec.Envelope.By, Version: rec.Seq})
	case events.OperatorRemoved:
		at := rec.Envelope.OccurredAt
		return bumpJSON(b, operatorKey(ev.Name), func(o *Operator) {
			o.Removed, o.RemovedAt, o.RemovedBy, o.Version = true, &at, rec.Envelope.By, rec.Seq
		})
	}
	return nil
}

// Operator reads one operator, removed or not.
func (v *View) Operator(name string) (Operator, bool, error) {
	return getOne[Operator](v.r, operatorKey(name))
}

// Operators lists every operator, removed ones included, by name.
func (v *View) Operators() ([]Operator, error) { return decodeRows[Operator](v.r, prefixOperator) }

// OperatorByKey is the operator, not removed, whose key is key: who a
// connection with that key is. A mesh has a handful of operators, so a
// scan costs less than keeping a second index in step.
func (v *View) OperatorByKey(key string) (Operator, bool, error) {
	all, err := v.Operators()
	for _, o := range all {
		if o.Key == key && !o.Removed {
			return o, true, nil
		}
	}
	return Operator{}, false, err
}
