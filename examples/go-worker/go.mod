module github.com/spoolq/spool/examples/go-worker

go 1.26.8

require github.com/spoolq/spool v0.0.0

// The client comes from this repository, two folders up.
replace github.com/spoolq/spool => ../..
