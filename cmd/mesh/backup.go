package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/meshctl/mesh/cmd/mesh/cmdline"
	"github.com/meshctl/mesh/cmd/mesh/text"
	"github.com/meshctl/mesh/commands"
	"github.com/meshctl/mesh/commands/secrets"
	"github.com/meshctl/mesh/embedded"
	"github.com/meshctl/mesh/events/store"
	"github.com/nats-io/nats.go"
)

const (
	backupEvents   = "events.jsonl"
	backupManifest = "manifest.json"
	// backupSalts holds the salts of the secrets not forgotten when the
	// backup was taken (rule 21): with the controller key, what opens them.
	backupSalts = "secrets.json"
)

// BackupCmd writes the stream and the controller's key to a directory.
type BackupCmd struct {
	Dir  string `arg:"" help:"A directory that does not exist yet, or is empty."`
	JSON bool   `help:"Print {dir, stream, first_seq, last_seq, messages, sha256, taken_at, secrets, artifacts} as JSON."`
}

// BackedUp is backup --json: the manifest the backup holds (what restore
// checks), where it is, and how many secrets' salts it carries.
type BackedUp struct {
	Dir string `json:"dir"`
	store.BackupManifest
	Secrets int `json:"secrets"`
	// Artifacts is how many artifacts' bytes it holds (issue 32).
	Artifacts int `json:"artifacts"`
}

func (c *BackupCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	if entries, err := os.ReadDir(c.Dir); err == nil && len(entries) > 0 {
		return cmdline.Usagef("%s is not empty; back up into a new directory", c.Dir)
	}
	key, err := os.ReadFile(filepath.Join(g.Home, commands.KeyFile))
	if err != nil {
		return fmt.Errorf("the controller key is not in %s (%v); run mesh backup with the controller's --home, so the backup can carry the mesh on", g.Home, err)
	}
	st, closeBus, err := g.Log(ctx, false, "mesh backup")
	if err != nil {
		return err
	}
	defer closeBus()
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(c.Dir, backupEvents), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	m, err := st.Export(ctx, f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("the backup in %s is incomplete: %w", c.Dir, err)
	}
	if err := os.WriteFile(filepath.Join(c.Dir, commands.KeyFile), key, 0o600); err != nil {
		return err
	}
	salts, err := secrets.ExportSalts(ctx, st.JetStream())
	if err != nil {
		return fmt.Errorf("the backup in %s is incomplete: %w", c.Dir, err)
	}
	b, _ := json.Marshal(salts)
	if err := os.WriteFile(filepath.Join(c.Dir, backupSalts), b, 0o600); err != nil {
		return err
	}
	arts, err := saveArtifacts(ctx, st.JetStream(), c.Dir)
	if err != nil {
		return fmt.Errorf("the backup in %s is incomplete: %w", c.Dir, err)
	}
	b, _ = json.MarshalIndent(m, "", "  ")
	if err := os.WriteFile(filepath.Join(c.Dir, backupManifest), b, 0o600); err != nil {
		return err
	}
	if c.JSON {
		return text.JSON(out.Out, BackedUp{Dir: c.Dir, BackupManifest: m, Secrets: len(salts), Artifacts: arts})
	}
	fmt.Fprintf(out.Out, "backed up %d event(s) of stream %s (sequences %d to %d) to %s, sha256 %s\n", m.Messages, m.Stream, m.FirstSeq, m.LastSeq, c.Dir, m.SHA256[:12])
	fmt.Fprintf(out.Out, "it holds the controller's secret key (%s) and the salts of %d secret(s) not forgotten (%s), both mode 0600: with the events they open those secrets, so keep it as you keep that key\n",
		commands.KeyFile, len(salts), backupSalts)
	fmt.Fprintf(out.Out, "it holds the bytes of %d artifact(s) (%s/)\n", arts, backupArtifacts)
	return nil
}

// RestoreCmd brings a backup into a home and bus that hold no mesh yet.
type RestoreCmd struct {
	Dir   string `arg:"" type:"existingdir" help:"A directory mesh backup wrote."`
	Force bool   `help:"Replace a stream that already holds events. What it holds is lost."`
	JSON  bool   `help:"Print {dir, stream, first_seq, last_seq, messages, published, resumed_after, replaced, salts, salts_there, salts_carried, artifacts, artifacts_there} as JSON."`
}

// Restored is restore --json: the backup's manifest, how many events were
// published now (fewer than messages when it resumed after resumed_after),
// how many a --force replaced, and the secrets' salts brought in.
type Restored struct {
	Dir string `json:"dir"`
	store.BackupManifest
	Published    uint64 `json:"published"`
	ResumedAfter uint64 `json:"resumed_after_seq,omitempty"`
	Replaced     uint64 `json:"replaced,omitempty"`
	Salts        int    `json:"salts"`
	SaltsThere   int    `json:"salts_there"`
	// SaltsCarried is false for a backup older than secrets: every secret
	// setting must then be given again.
	SaltsCarried bool `json:"salts_carried"`
	// Artifacts is how many artifacts' bytes were put into the bus now,
	// ArtifactsThere how many it held already (issue 32).
	Artifacts      int `json:"artifacts"`
	ArtifactsThere int `json:"artifacts_there"`
}

func (c *RestoreCmd) Run(ctx context.Context, g *cmdline.Globals, out *cmdline.Output) error {
	var m store.BackupManifest
	b, err := os.ReadFile(filepath.Join(c.Dir, backupManifest))
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil {
		return fmt.Errorf("%s holds no readable %s (%v); is it a directory mesh backup wrote?", c.Dir, backupManifest, err)
	}
	events := filepath.Join(c.Dir, backupEvents)
	if err := verifyFile(m, events); err != nil {
		return err
	}
	key, err := os.ReadFile(filepath.Join(c.Dir, commands.KeyFile))
	if err != nil {
		return fmt.Errorf("the backup in %s holds no controller key (%v): nodes would refuse what another key signs", c.Dir, err)
	}
	if err := placeKey(g.Home, key); err != nil {
		return err
	}
	nc, stop, err := restoreBus(ctx, g)
	if err != nil {
		return err
	}
	defer stop()
	st, _, err := store.Open(ctx, nc, store.StreamConfig{})
	if err != nil {
		return err
	}
	// With --json what each step says goes in the one answer at the end.
	say := out.Out
	if c.JSON {
		say = io.Discard
	}
	res := Restored{Dir: c.Dir, BackupManifest: m}
	if state, _ := st.State(ctx); c.Force && state.Msgs > 0 {
		if st, err = st.Replace(ctx, store.StreamConfig{}); err != nil {
			return err
		}
		res.Replaced = state.Msgs
		fmt.Fprintf(say, "replaced stream %s, which held %d event(s)\n", st.Name(), state.Msgs)
	}
	f, err := os.Open(events)
	if err != nil {
		return err
	}
	defer f.Close()
	n, from, err := st.Import(ctx, m, f)
	if err != nil {
		return err
	}
	res.Published = n
	if res.Salts, res.SaltsThere, res.SaltsCarried, err = restoreSalts(ctx, st, c.Dir, say); err != nil {
		return err
	}
	if res.Artifacts, res.ArtifactsThere, err = loadArtifacts(ctx, st.JetStream(), c.Dir); err != nil {
		return err
	}
	fmt.Fprintf(say, "restored the bytes of %d artifact(s) (%d there already)\n", res.Artifacts, res.ArtifactsThere)
	if from > 1 {
		res.ResumedAfter = from - 1
		fmt.Fprintf(say, "resumed an interrupted restore after event %d\n", from-1)
	}
	// The home's read models, if any, belong to another stream now: remove
	// them so the next start folds the restored one (it would notice anyway).
	os.RemoveAll(filepath.Join(g.Home, "projections"))
	if c.JSON {
		return text.JSON(out.Out, res)
	}
	fmt.Fprintf(out.Out, "restored %d event(s) into stream %s (sequences %d to %d; %d published now) and the controller key into %s\n", m.Messages, st.Name(), m.FirstSeq, m.LastSeq, n, g.Home)
	fmt.Fprintln(out.Out, "start the mesh with mesh up (or mesh serve): it folds the read models from the restored stream")
	return nil
}

// restoreSalts brings the backup's salts into the bus, so its secrets
// open: how many it brought, how many were there already, and whether the
// backup carried any (one older than secrets does not).
func restoreSalts(ctx context.Context, st *store.Store, dir string, say io.Writer) (restored, there int, carried bool, err error) {
	b, err := os.ReadFile(filepath.Join(dir, backupSalts))
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(say, "the backup carries no %s (it is older than secrets): every secret setting must be given again (mesh assign NODE MODULE --set-file NAME=FILE)\n", backupSalts)
		return 0, 0, false, nil
	}
	var salts map[string][]byte
	if err == nil {
		err = json.Unmarshal(b, &salts)
	}
	if err != nil {
		return 0, 0, false, fmt.Errorf("the backup's %s cannot be read (%v); its secrets would not open, so nothing more was restored: mesh restore again with a whole backup", backupSalts, err)
	}
	n, err := secrets.RestoreSalts(ctx, st.JetStream(), 0, salts)
	if err != nil {
		return 0, 0, true, err
	}
	fmt.Fprintf(say, "restored the salts of %d secret(s) (%d there already)\n", n, len(salts)-n)
	return n, len(salts) - n, true, nil
}

func verifyFile(m store.BackupManifest, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("the backup has no %s: %v", backupEvents, err)
	}
	defer f.Close()
	return store.VerifyBackup(m, f)
}

// placeKey puts the backup's controller key in the home, refusing to replace
// another key: that would change which key the mesh signs with.
func placeKey(home string, key []byte) error {
	path := filepath.Join(home, commands.KeyFile)
	have, err := os.ReadFile(path)
	switch {
	case err == nil && string(have) == string(key):
		return nil
	case err == nil:
		return fmt.Errorf("%s already holds another controller key; restore into a fresh home", home)
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, key, 0o600)
}

// restoreBus is the bus named by --bus or MESH_NATS_URL, or with neither the
// home's embedded bus, started here for the restore (the home must not be in
// use by a running mesh up).
func restoreBus(ctx context.Context, g *cmdline.Globals) (*nats.Conn, func(), error) {
	if g.BusNamed() {
		addr, err := g.ResolveBus(true)
		if err != nil {
			return nil, nil, err
		}
		nc, err := g.Dial(addr, "mesh restore")
		if err != nil {
			return nil, nil, err
		}
		return nc, nc.Close, nil
	}
	release, err := cmdline.LockHome(g.Home, "mesh restore")
	if err != nil {
		return nil, nil, err
	}
	// In process only: the bus is open while the restore runs, and nothing
	// outside this process may write to it meanwhile.
	srv, err := embedded.Start(ctx, embedded.Options{Dir: filepath.Join(g.Home, "nats"), InProcessOnly: true})
	if err != nil {
		release()
		return nil, nil, err
	}
	nc, err := srv.Connect()
	if err != nil {
		srv.Close()
		release()
		return nil, nil, err
	}
	return nc, func() { nc.Close(); srv.Close(); release() }, nil
}
