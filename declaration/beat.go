package declaration

import (
	"bytes"
	"strconv"
	"time"
)

// A beat is a node's word that it is alive (issue 28): the time it was
// said, in unix nanoseconds, and the MAC of it on its subject under the
// node's report MAC key (ReportMACKey), which only the node's join string
// and the controller give. The subject alone proved nothing: a node may
// make requests whose answers the bus delivers to any reply subject it
// names, a liveness subject included, so another node's answers would
// otherwise keep a dead node looking alive. A MAC costs the controller
// about a microsecond a beat, where a signature would cost fifty.

// Beat is the payload of a beat said at at on subject.
func Beat(mac []byte, subject string, at time.Time) []byte {
	t := strconv.FormatInt(at.UnixNano(), 10)
	return []byte(t + " " + MAC(mac, subject, []byte(t)))
}

// CheckBeat answers when a beat on subject was said, and whether it is the
// node's (its MAC holds under key). c is the caller's (one per goroutine).
func (c *MACChecker) CheckBeat(key []byte, subject string, data []byte) (time.Time, bool) {
	// Cut from data as bytes: as a string, the beat was copied at every
	// one of them, the MAC's text copied again and its time a third time.
	t, mac, ok := bytes.Cut(data, []byte{' '})
	if !ok || !c.check(key, subject, t, mac) {
		return time.Time{}, false
	}
	ns, err := strconv.ParseInt(string(t), 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(0, ns), true
}
