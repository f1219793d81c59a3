package main

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/spoolq/spool/internal/config"
)

// serverFlag is one flag of `spool server` as config.Load describes it:
// config stays the one definition of the server's settings, and the
// command registers them with the flag parser every command shares.
type serverFlag struct {
	name, typ, usage, def string
}

// serverFlags reads the flags of `spool server` out of the help that
// config.Load prints in the standard flag package's layout:
//
//	-name type
//	  	usage (default value)
func serverFlags() []serverFlag {
	var help bytes.Buffer
	_, _ = config.Load([]string{"-h"}, func(string) string { return "" }, &help)
	var flags []serverFlag
	sc := bufio.NewScanner(&help)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "  -"):
			f := strings.Fields(line[3:])
			sf := serverFlag{name: f[0], typ: "bool"}
			if len(f) > 1 {
				sf.typ = f[1]
			}
			flags = append(flags, sf)
		case strings.HasPrefix(line, "    \t") && len(flags) > 0:
			last := &flags[len(flags)-1]
			last.usage = strings.TrimSpace(last.usage + " " + strings.TrimSpace(line))
		}
	}
	for i := range flags {
		f := &flags[i]
		if at := strings.LastIndex(f.usage, " (default "); at >= 0 && strings.HasSuffix(f.usage, ")") {
			f.def = f.usage[at+len(" (default ") : len(f.usage)-1]
			f.usage = f.usage[:at]
			if s, err := strconv.Unquote(f.def); err == nil {
				f.def = s
			}
		}
		if f.typ == "value" {
			f.typ = typeOf(f.def)
		}
	}
	return flags
}

// typeOf names the kind of value a default looks like, for help.
func typeOf(def string) string {
	if _, err := strconv.Atoi(def); err == nil {
		return "int"
	}
	if _, err := time.ParseDuration(def); err == nil {
		return "duration"
	}
	return "string"
}

// textFlag keeps the text of a server flag for config.Load to parse, so
// that flags, environment and config file share one parser.
type textFlag struct{ text, typ string }

func (f *textFlag) String() string     { return f.text }
func (f *textFlag) Set(v string) error { f.text = v; return nil }
func (f *textFlag) Type() string       { return f.typ }

// addServerFlags defines the flags of `spool server` on fs.
func addServerFlags(fs *pflag.FlagSet) []serverFlag {
	flags := serverFlags()
	for _, sf := range flags {
		f := fs.VarPF(&textFlag{text: sf.def, typ: sf.typ}, sf.name, "", sf.usage)
		if sf.typ == "bool" {
			f.NoOptDefVal = "true"
		}
	}
	return flags
}

// serverArgs is the command line config.Load reads: the server flags
// given on fs, as --name=value.
func serverArgs(fs *pflag.FlagSet, flags []serverFlag) []string {
	var args []string
	for _, sf := range flags {
		if f := fs.Lookup(sf.name); f != nil && f.Changed {
			args = append(args, "--"+sf.name+"="+f.Value.String())
		}
	}
	return args
}
