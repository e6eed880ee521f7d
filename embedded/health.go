package embedded

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Health is the server's own health check: "" when ok, else why not.
func (s *Server) Health() string {
	h := s.ns.Healthz(&server.HealthzOptions{})
	if h.Status == "ok" {
		return ""
	}
	return h.Error
}

// On a full disk nats-server marks the stream it could not write with a
// "critical write error" and from then on neither stores nor answers a
// publish to it, even once the disk has room again, until its JetStream is
// started again (issue 12: freeing the space did not help until a
// restart). The single-box mesh owns its bus, so it watches for that.

// roomToResume is the free space JetStream's directory needs before it is
// started again: less, and the first writes would fail again.
const roomToResume = 4 << 20

// ErrStorageFailed: the bus could not write a stream to its disk (full, most
// often), and takes no more events until there is room and it recovers.
var ErrStorageFailed = errors.New("a write to the bus's disk failed (a full disk, most often); the mesh stores again by itself once there is room")

// ErrDataGone: the bus's data directory was removed under it. The server
// goes on writing into files nothing can find again: what it takes now is
// lost at its next start, so the mesh takes nothing more.
var ErrDataGone = errors.New("the bus's data directory was removed while it ran: what it stored is lost at its next start; stop the mesh and restore a backup (mesh restore)")

// KeepStorage watches the bus's health every second until ctx ends. When a
// stream meets a write error it logs it once and calls trouble with
// ErrStorageFailed; once the data directory's file system has room it
// starts JetStream again (its streams as they are on disk), logs that, and
// calls trouble with nil.
func (s *Server) KeepStorage(ctx context.Context, log *slog.Logger, trouble func(error)) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	down, gone := false, false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if _, err := os.Stat(filepath.Join(s.dir, "jetstream")); errors.Is(err, fs.ErrNotExist) {
			if !gone {
				gone = true
				log.Error(ErrDataGone.Error())
				trouble(ErrDataGone)
			}
			continue
		}
		h := s.Health()
		if !strings.Contains(h, "write error") {
			continue
		}
		if !down {
			down = true
			log.Error("the bus cannot write to its disk: " + h + "; it takes no events until there is room, then starts storing again by itself")
			trouble(ErrStorageFailed)
		}
		if free(s.dir) < roomToResume {
			continue
		}
		if err := s.restartJetStream(); err != nil {
			log.Warn("the bus's JetStream cannot start again yet", "err", err)
			continue
		}
		down = false
		log.Info("the bus's disk has room again: JetStream started again, and stores events")
		trouble(nil)
	}
}

// restartJetStream stops JetStream for the global account and starts it
// again, recovering its streams from disk as a restart of the server would.
func (s *Server) restartJetStream() error {
	acc := s.ns.GlobalAccount()
	if err := acc.DisableJetStream(); err != nil {
		return err
	}
	return acc.EnableJetStream(nil, nil)
}

// free is the space left for an unprivileged writer on dir's file system.
func free(dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0
	}
	return int64(st.Bavail) * int64(st.Bsize)
}
