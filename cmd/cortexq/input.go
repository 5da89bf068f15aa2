package main

import (
	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue/text"
)

// pathFlags name files and directories: a path need not be UTF-8, and is not stored as text.
var pathFlags = map[string]bool{"home": true, "pg-bin": true, "dir": true, "from-list": true, "key-file": true,
	"curve-secret-key-file": true, "out": true, "cpuprofile": true, "latexmlc": true, "latexml": true}

// pathArgs are the commands whose arguments are paths (import, keys public, allow and revoke),
// or handed to another program.
var pathArgs = map[string]bool{"import": true, "psql": true, "exec": true, "public": true, "allow": true, "revoke": true}

// checkTextInput refuses a flag's value or an argument that PostgreSQL could not store as text
// (not UTF-8, or a NUL), in one line naming it, before the command runs (text.CheckInput, as
// the web dashboard checks its query and form values).
func checkTextInput(c *cli.Context) error {
	for _, f := range c.Command.Flags {
		names := f.Names()
		if len(names) == 0 || pathFlags[names[0]] || !c.IsSet(names[0]) {
			continue
		}
		var values []string
		switch f.(type) {
		case *cli.StringFlag:
			values = []string{c.String(names[0])}
		case *cli.StringSliceFlag:
			values = c.StringSlice(names[0])
		}
		for _, v := range values {
			if err := text.CheckInput("--"+names[0], v); err != nil {
				return err
			}
		}
	}
	if pathArgs[c.Command.Name] {
		return nil
	}
	for _, a := range c.Args().Slice() {
		if err := text.CheckInput("argument", a); err != nil {
			return err
		}
	}
	return nil
}
