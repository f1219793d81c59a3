package main

import (
	"strconv"
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

// serverFlags are the flags of `spool server`, from config.Flags.
func serverFlags() []serverFlag {
	var flags []serverFlag
	for _, f := range config.Flags() {
		typ := "bool"
		if !f.Bool {
			typ = typeOf(f.Default)
		}
		flags = append(flags, serverFlag{name: f.Name, typ: typ, usage: f.Usage, def: f.Default})
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
