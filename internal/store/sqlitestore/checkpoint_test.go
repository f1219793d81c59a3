package sqlitestore

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spoolq/spool/internal/job"
	"github.com/spoolq/spool/internal/store"
)

// Commits leave checkpoints to the checkpointer, and the WAL still stays
// near walResetFrames pages however much is written: here about three
// times that much.
func TestWALStaysBoundedUnderSteadyWrites(t *testing.T) {
	t.Parallel()
	b := setup(t)
	payload := json.RawMessage(`"` + strings.Repeat("x", 4000) + `"`)
	const batches, perBatch = 120, 100 // 48 MB of payload
	for i := 0; i < batches; i++ {
		b.insert(params("q", perBatch, func(_ int, p *store.JobInsertParams) { p.Payload = payload })...)
	}
	info, err := os.Stat(filepath.Join(b.dir, "spool.db-wal"))
	if err != nil {
		t.Fatal(err)
	}
	const bound = 2 * walResetFrames * 4096
	if info.Size() > bound {
		t.Fatalf("WAL is %d bytes after %d MB of jobs, want at most %d", info.Size(), batches*perBatch*len(payload)>>20, bound)
	}
	if b.s.c.ckpt.runs.Load() == 0 {
		t.Fatal("the checkpointer never ran")
	}
	if c := b.counts("q"); c[job.StateAvailable] != batches*perBatch {
		t.Fatalf("counts %v, want %d available", c, batches*perBatch)
	}
	b.checkCounts("q")
}
