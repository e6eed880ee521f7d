package daemon

import (
	"net"
	"os"
)

// notifyReady tells systemd (a unit of Type=notify) that the service is
// ready, when it runs under one: the protocol is one datagram, READY=1,
// to the socket in NOTIFY_SOCKET (an abstract one when it begins with @).
// Outside systemd it does nothing. A unit then starts what depends on the
// controller only once the controller answers.
func notifyReady() error {
	addr := os.Getenv("NOTIFY_SOCKET")
	if addr == "" {
		return nil
	}
	if addr[0] == '@' {
		addr = "\x00" + addr[1:]
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: addr, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = conn.Write([]byte("READY=1"))
	return err
}
