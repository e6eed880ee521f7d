package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/meshctl/mesh/commands/core/coretest"
)

// Time travel answers as the same controller: every field of Self (its
// bus, name, keys, secrets) is the present's in the past's Core, over read
// models of its own. Fails when the past's Core is built field by field and
// one is missed.
func TestThePastIsTheSameController(t *testing.T) {
	c := coretest.New(t, true).Fold()
	past, done, err := c.InThePast(context.Background(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	if past.Self != c.Self || !past.Past || past.Proj == c.Proj {
		t.Fatalf("the past's core: %+v", past.Self)
	}
}
