package sqlitestore

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkFsyncOfTheLog compares an fsync (syncData) after each append
// of 80 KB, about what a commit of 40 single enqueues writes, to a file
// that each append lengthens, as the write-ahead log was while it grew,
// with the same appends to a file grown ahead with zeros a step at a
// time, as walBufferVFS grows the log.
func BenchmarkFsyncOfTheLog(b *testing.B) {
	for _, ahead := range []bool{false, true} {
		name := "lengthened"
		if ahead {
			name = "grown-ahead"
		}
		b.Run(name, func(b *testing.B) {
			f, err := os.Create(filepath.Join(b.TempDir(), "log"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			chunk := make([]byte, 80<<10)
			zeros := make([]byte, walGrowStep)
			var grown int64
			b.ResetTimer()
			for i := range b.N {
				off := int64(i) * int64(len(chunk))
				if ahead && off+int64(len(chunk)) > grown {
					if _, err := f.WriteAt(zeros, grown); err != nil {
						b.Fatal(err)
					}
					grown += walGrowStep
				}
				if _, err := f.WriteAt(chunk, off); err != nil {
					b.Fatal(err)
				}
				if err := syncData(f); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
