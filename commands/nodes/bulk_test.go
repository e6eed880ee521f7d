package nodes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/meshctl/mesh/client"
	"github.com/meshctl/mesh/commands/commandstest"
	"github.com/meshctl/mesh/embedded/embeddedtest"
	"github.com/meshctl/mesh/wire"
	"github.com/nats-io/nats.go"
)

func batchCall[Req, Resp any](t *testing.T, c *client.Client, subject string, req Req) (Resp, error) {
	t.Helper()
	var out Resp
	err := c.Call(context.Background(), subject, req, &out)
	return out, err
}

func nodeCount(t *testing.T, c *client.Client) int {
	t.Helper()
	var l wire.NodeList
	if err := c.Call(context.Background(), wire.SubjectNodeList, wire.Empty{}, &l); err != nil {
		t.Fatal(err)
	}
	return len(l.Nodes)
}

// A bulk enrolment is all or nothing per batch: one node of it enrolled
// differently refuses the whole batch and records nothing; the same list
// again, once fixed, enrolls what is missing and calls the rest nothing to do.
func TestEnrollBatchIsAllOrNothing(t *testing.T) {
	c := commandstest.Controller(t, embeddedtest.Server(t))
	if _, err := commandstest.Enroll(c, "web-5", "linux"); err != nil {
		t.Fatal(err)
	}
	var list []wire.EnrollRequest
	for i := range 10 {
		list = append(list, wire.EnrollRequest{Name: fmt.Sprintf("web-%d", i), Capabilities: []string{"linux"}, Labels: map[string]string{"zone": "eu-1"}})
	}
	// web-5 exists without the zone label: the batch is refused whole.
	_, err := batchCall[wire.EnrollBatchRequest, wire.BatchReply](t, c, wire.SubjectNodeEnrollBatch,
		wire.EnrollBatchRequest{CommandID: wire.NewCommandID(), Nodes: list})
	if commandstest.Code(err) != wire.CodeConflict {
		t.Fatalf("a batch holding a name enrolled otherwise: err %v (code %q), want a conflict", err, commandstest.Code(err))
	}
	if n := nodeCount(t, c); n != 1 {
		t.Fatalf("a refused batch left %d nodes, want the 1 before it", n)
	}
	list[5].Labels = nil
	r, err := batchCall[wire.EnrollBatchRequest, wire.BatchReply](t, c, wire.SubjectNodeEnrollBatch,
		wire.EnrollBatchRequest{CommandID: wire.NewCommandID(), Nodes: list})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Changed) != 9 || !slices.Equal(r.Unchanged, []string{"web-5"}) {
		t.Fatalf("enrolled %v, unchanged %v; want 9 enrolled and web-5 nothing to do", r.Changed, r.Unchanged)
	}
	if n := nodeCount(t, c); n != 10 {
		t.Fatalf("%d nodes after the batch, want 10", n)
	}
	// Twice in one list is refused before anything is decided.
	list = append(list, list[0])
	if _, err := batchCall[wire.EnrollBatchRequest, wire.BatchReply](t, c, wire.SubjectNodeEnrollBatch,
		wire.EnrollBatchRequest{CommandID: wire.NewCommandID(), Nodes: list}); commandstest.Code(err) != wire.CodeBadRequest {
		t.Fatalf("a node named twice: err %v, want a bad request", err)
	}
}

// A bulk assignment by selector chooses exactly the matching active nodes,
// and a batch naming a retired node is refused whole.
func TestAssignBatchBySelector(t *testing.T) {
	c := commandstest.Controller(t, embeddedtest.Server(t))
	var list []wire.EnrollRequest
	for i := range 6 {
		list = append(list, wire.EnrollRequest{Name: fmt.Sprintf("n-%d", i), Capabilities: []string{"linux"},
			Labels: map[string]string{"zone": fmt.Sprintf("z%d", i%2)}})
	}
	if _, err := batchCall[wire.EnrollBatchRequest, wire.BatchReply](t, c, wire.SubjectNodeEnrollBatch,
		wire.EnrollBatchRequest{CommandID: wire.NewCommandID(), Nodes: list}); err != nil {
		t.Fatal(err)
	}
	manifest := `{"module":"tool","resources":[{"kind":"file","path":"/etc/tool","mode":"0644","content":"x\n"}]}`
	var reg wire.Registered
	if err := c.Call(context.Background(), wire.SubjectModuleRegister, wire.RegisterRequest{CommandID: wire.NewCommandID(), File: "tool.json", Manifest: manifest}, &reg); err != nil {
		t.Fatal(err)
	}
	var ret wire.Changed
	if err := c.Call(context.Background(), wire.SubjectNodeRetire, wire.RetireRequest{CommandID: wire.NewCommandID(), Name: "n-4"}, &ret); err != nil {
		t.Fatal(err)
	}
	sel, err := batchCall[wire.SelectRequest, wire.Selected](t, c, wire.SubjectNodeSelect, wire.SelectRequest{Selector: "zone=z0,capability=linux"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sel.Nodes, []string{"n-0", "n-2"}) {
		t.Fatalf("zone=z0 chose %v, want n-0 and n-2 (n-4 is retired)", sel.Nodes)
	}
	if _, err := batchCall[wire.SelectRequest, wire.Selected](t, c, wire.SubjectNodeSelect, wire.SelectRequest{Selector: "zone"}); commandstest.Code(err) != wire.CodeBadRequest {
		t.Fatalf("a term without '=': err %v, want a bad request", err)
	}
	// n-4 is retired: the batch naming it assigns to none of them.
	_, err = batchCall[wire.AssignBatchRequest, wire.BatchReply](t, c, wire.SubjectNodeAssignBatch,
		wire.AssignBatchRequest{CommandID: wire.NewCommandID(), Module: "tool", Nodes: []string{"n-0", "n-2", "n-4"}})
	if err == nil {
		t.Fatal("a batch naming a retired node was taken")
	}
	r, err := batchCall[wire.AssignBatchRequest, wire.BatchReply](t, c, wire.SubjectNodeAssignBatch,
		wire.AssignBatchRequest{CommandID: wire.NewCommandID(), Module: "tool", Nodes: sel.Nodes})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Changed) != 2 || r.Build != reg.Build {
		t.Fatalf("assigned %v build %s, want n-0 and n-2 with %s", r.Changed, r.Build, reg.Build)
	}
	var nodes wire.NodeList
	if err := c.Call(context.Background(), wire.SubjectNodeList, wire.Empty{}, &nodes); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes.Nodes {
		if has := len(n.Assignments) == 1; has != (n.Name == "n-0" || n.Name == "n-2") {
			t.Errorf("%s holds %d assignments after the refused and the good batch", n.Name, len(n.Assignments))
		}
	}
	// Again: nothing to do, nothing appended.
	r, err = batchCall[wire.AssignBatchRequest, wire.BatchReply](t, c, wire.SubjectNodeAssignBatch,
		wire.AssignBatchRequest{CommandID: wire.NewCommandID(), Module: "tool", Nodes: sel.Nodes})
	if err != nil || len(r.Changed) != 0 || len(r.Unchanged) != 2 || r.Seq != 0 {
		t.Fatalf("the same assignment again: %+v %v, want nothing to do", r, err)
	}
}

// A push says as it goes how many nodes it has sent, a window at a time,
// ending at all of them: the command line shows it on a terminal.
func TestPushSaysItsProgress(t *testing.T) {
	t.Parallel() // its own bus and homes; long and partly waiting: beside the others
	srv := embeddedtest.Server(t)
	c := commandstest.Controller(t, srv)
	var list []wire.EnrollRequest
	for i := range 2500 {
		list = append(list, wire.EnrollRequest{Name: fmt.Sprintf("p-%04d", i)})
	}
	for from := 0; from < len(list); from += wire.MaxBatch {
		if _, err := batchCall[wire.EnrollBatchRequest, wire.BatchReply](t, c, wire.SubjectNodeEnrollBatch,
			wire.EnrollBatchRequest{CommandID: wire.NewCommandID(), Nodes: list[from:min(from+wire.MaxBatch, len(list))]}); err != nil {
			t.Fatal(err)
		}
	}
	inbox := c.NC.NewRespInbox()
	said := make(chan *nats.Msg, 16)
	sub, err := c.NC.ChanSubscribe(inbox, said)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	c.NC.Flush()
	var r wire.PushReply
	if err := c.Call(context.Background(), wire.SubjectPush, wire.PushRequest{CommandID: wire.NewCommandID(), Progress: inbox}, &r); err != nil || len(r.Sent) != 2500 {
		t.Fatalf("push: %v, %d sent", err, len(r.Sent))
	}
	c.NC.Flush()
	var last wire.FoldProgress
	for len(said) > 0 {
		json.Unmarshal((<-said).Data, &last)
	}
	if last.Folded != 2500 || last.Total != 2500 {
		t.Fatalf("the push's last word on its progress: %d of %d, want 2500 of 2500", last.Folded, last.Total)
	}
}
