package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	zmq "github.com/pebbe/zmq4"
	"github.com/urfave/cli/v2"

	"github.com/cortexq/cortexq/queue"
	"github.com/cortexq/cortexq/queue/allowlist"
	"github.com/cortexq/cortexq/queue/dispatch"
	"github.com/cortexq/cortexq/worker"
)

func keysCommand() *cli.Command {
	return &cli.Command{
		Name:  "keys",
		Usage: "make CURVE key pairs and manage the allow-list of worker keys",
		Description: "With CURVE on (serve --curve-secret-key-file), a replica encrypts both worker sockets and lets in\n" +
			"only workers whose public key is allowed here. The allow-list is the worker_keys table: every\n" +
			"replica re-reads it every few seconds (serve --keys-refresh), so allow and revoke take effect\n" +
			"without a restart. A key's name is the principal it authenticates: its workers are recorded as\n" +
			"key:<name>/<identity>, and only a key that held an attempt of a task may answer it.",
		Subcommands: []*cli.Command{
			{
				Name:  "gen",
				Usage: "make a CURVE key pair: a file with the public and the secret key (mode 0600)",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "out", Usage: "write the key pair to this file (refused if it exists); empty: stdout", EnvVars: envVars("KEYS_OUT")},
				},
				Action: keysGen,
			},
			{
				Name:      "public",
				Usage:     "print the public key of a key pair file",
				ArgsUsage: "FILE",
				Action:    keysPublic,
			},
			{
				Name:      "allow",
				Usage:     "let a worker key in, under a name",
				ArgsUsage: "PUBLIC_KEY|KEY_FILE",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "name", Usage: "the key's name (required): 1-64 letters, digits, '.', '_' or '-'", EnvVars: envVars("KEYS_NAME")},
					&cli.BoolFlag{Name: "rename", Usage: "let a key allowed under another name take --name (its workers are then recorded under the new name)", EnvVars: envVars("KEYS_RENAME")},
				},
				// A Z85 key may begin with '-': the action parses the arguments (see positional).
				SkipFlagParsing: true,
				Action:          keysAllow,
			},
			{
				Name:      "revoke",
				Usage:     "shut a worker key out (or every key of --name)",
				ArgsUsage: "PUBLIC_KEY|KEY_FILE",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "name", Usage: "revoke every allowed key of this name instead", EnvVars: envVars("KEYS_NAME")},
				},
				SkipFlagParsing: true,
				Action:          keysRevoke,
			},
			{
				Name:   "list",
				Usage:  "list the worker keys, revoked ones included",
				Action: keysList,
			},
		},
	}
}

// keyPairFile is the text of a key pair file, in the layout of ZeroMQ certificates (zcert), so
// pyzmq's zmq.auth.load_certificate and czmq read it too.
func keyPairFile(public, secret string) []byte {
	return fmt.Appendf(nil, "#   ****  Generated on %s by cortexq keys gen  ****\n"+
		"#   ZeroMQ CURVE **Secret** Certificate\n"+
		"#   DO NOT PROVIDE THIS FILE TO OTHER USERS nor change its permissions.\n\n"+
		"metadata\n"+
		"curve\n"+
		"    public-key = \"%s\"\n"+
		"    secret-key = \"%s\"\n", time.Now().UTC().Format(time.DateTime+" UTC"), public, secret)
}

// readKeyFile reads a key file (a key pair, or a public key only): its public key, and its
// secret key when it has one.
func readKeyFile(path string) (public, secret string, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", "", fmt.Errorf("key file: %w", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		name, value, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		value = strings.Trim(strings.TrimSpace(value), `"'`)
		switch strings.TrimSpace(name) {
		case "public-key":
			public = value
		case "secret-key":
			secret = value
		}
	}
	if secret != "" {
		derived, derr := zmq.AuthCurvePublic(secret)
		if derr != nil || len(secret) != 40 {
			return "", "", fmt.Errorf("key file %s: the secret key is not a Z85 CURVE key", path)
		}
		if public == "" {
			public = derived
		}
		if public != derived {
			return "", "", fmt.Errorf("key file %s: the public key does not match the secret key", path)
		}
	}
	if err := allowlist.ValidPublicKey(public); err != nil {
		return "", "", fmt.Errorf("key file %s: %w", path, err)
	}
	return public, secret, nil
}

// publicKeyArg reads a PUBLIC_KEY|KEY_FILE argument: a Z85 public key, or a file holding one.
func publicKeyArg(c *cli.Context, arg string) (string, error) {
	if allowlist.ValidPublicKey(arg) == nil {
		if _, err := os.Stat(arg); err != nil {
			return arg, nil
		}
	}
	pub, _, err := readKeyFile(arg)
	if errors.Is(err, os.ErrNotExist) {
		return "", usagef(c, "%q is neither a Z85 public key (40 characters) nor a key file", arg)
	}
	return pub, err
}

func keysGen(c *cli.Context) error {
	if err := noArgs(c); err != nil {
		return err
	}
	public, secret, err := zmq.NewCurveKeypair()
	if err != nil {
		return fmt.Errorf("make a key pair: %w", err)
	}
	out := c.String("out")
	if out == "" {
		_, err := c.App.Writer.Write(keyPairFile(public, secret))
		return err
	}
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("key file: %w", err)
	}
	if _, err := f.Write(keyPairFile(public, secret)); err != nil {
		f.Close()
		return fmt.Errorf("key file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("key file: %w", err)
	}
	fmt.Fprintf(c.App.Writer, "wrote the key pair to %s (mode 0600)\npublic key: %s\n", out, public)
	return nil
}

func keysPublic(c *cli.Context) error {
	args, err := positional(c)
	if err != nil {
		return err
	}
	if len(args) != 1 {
		return usagef(c, "want one FILE")
	}
	public, _, err := readKeyFile(args[0])
	if err != nil {
		return err
	}
	fmt.Fprintln(c.App.Writer, public)
	return nil
}

func keysAllow(c *cli.Context) error {
	args, err := positional(c)
	if err != nil {
		return err
	}
	if len(args) != 1 {
		return usagef(c, "want one PUBLIC_KEY or KEY_FILE")
	}
	if err := required(c, "name"); err != nil {
		return err
	}
	if err := allowlist.ValidKeyName(c.String("name")); err != nil {
		return usagef(c, "%v", err)
	}
	public, err := publicKeyArg(c, args[0])
	if err != nil {
		return err
	}
	root, done, err := openBase(c)
	if err != nil {
		return err
	}
	defer done()
	// The name is the principal results are checked against: changing it must be meant.
	keys, err := root.Allowlist.All(c.Context)
	if err != nil {
		return err
	}
	was := ""
	for _, k := range keys {
		if k.PublicKey == public && k.RevokedAt == nil && k.Name != c.String("name") {
			was = k.Name
		}
	}
	if was != "" && !c.Bool("rename") {
		return fmt.Errorf("key %s is allowed as %s: give --rename to name it %s (its workers are then recorded as key:%s/...)",
			public, was, c.String("name"), c.String("name"))
	}
	k, err := root.Allowlist.Allow(c.Context, public, c.String("name"))
	if err != nil {
		return err
	}
	renamed := ""
	if was != "" {
		renamed = " (renamed from " + printable(was) + ")"
	}
	fmt.Fprintf(c.App.Writer, "allowed key %s as %s%s; replicas let it in within their --keys-refresh\n", k.PublicKey, printable(k.Name), renamed)
	return nil
}

func keysRevoke(c *cli.Context) error {
	args, err := positional(c)
	if err != nil {
		return err
	}
	name := c.String("name")
	var public string
	switch {
	case len(args) == 1 && name == "":
		if public, err = publicKeyArg(c, args[0]); err != nil {
			return err
		}
	case len(args) == 0 && name != "":
	default:
		return usagef(c, "want one PUBLIC_KEY or KEY_FILE, or --name")
	}
	root, done, err := openBase(c)
	if err != nil {
		return err
	}
	defer done()
	revoked, err := root.Allowlist.Revoke(c.Context, public, name)
	if errors.Is(err, queue.ErrNotFound) {
		return fmt.Errorf("no allowed key %s", public+name)
	}
	if err != nil {
		return err
	}
	for _, k := range revoked {
		fmt.Fprintf(c.App.Writer, "revoked key %s (%s)\n", k.PublicKey, printable(k.Name))
	}
	fmt.Fprintln(c.App.Writer, "replicas drop its messages within their --keys-refresh; its leases are retried when they expire")
	return nil
}

func keysList(c *cli.Context) error {
	root, done, err := openBaseNoArgs(c)
	if err != nil {
		return err
	}
	defer done()
	keys, err := root.Allowlist.All(c.Context)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(c.App.Writer, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "PUBLIC KEY\tNAME\tADDED\tREVOKED")
	for _, k := range keys {
		revoked := "-"
		if k.RevokedAt != nil {
			revoked = zoned(*k.RevokedAt, time.DateTime)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", k.PublicKey, printable(k.Name), zoned(k.AddedAt, time.DateTime), revoked)
	}
	return w.Flush()
}

// Flags of serve and worker for CURVE.

func curveSecretKeyFileFlag() cli.Flag {
	return &cli.StringFlag{Name: "curve-secret-key-file", Usage: "turn CURVE on with this replica key pair file (cortexq keys gen): only allowed worker keys get in; empty: plain ZMTP, for loopback and trusted networks", EnvVars: envVars("CURVE_SECRET_KEY_FILE")}
}

func keysRefreshFlag() cli.Flag {
	return &cli.DurationFlag{Name: "keys-refresh", Usage: "with CURVE, how often the allow-list of worker keys is read again", Value: dispatch.KeysRefreshDefault, EnvVars: envVars("KEYS_REFRESH")}
}

func serverKeyFlag() cli.Flag {
	return &cli.StringFlag{Name: "server-key", Usage: "the replicas' CURVE public key, or a key file holding it: turns CURVE on (needs --key-file)", EnvVars: envVars("WORKER_SERVER_KEY")}
}

func keyFileFlag() cli.Flag {
	return &cli.StringFlag{Name: "key-file", Usage: "this worker's CURVE key pair file (cortexq keys gen), whose public key is allowed (cortexq keys allow)", EnvVars: envVars("WORKER_KEY_FILE")}
}

// serveSecurity is the Security of serve's flags.
func serveSecurity(c *cli.Context) (dispatch.Security, error) {
	sec := dispatch.Security{KeysRefresh: c.Duration("keys-refresh")}
	path := c.String("curve-secret-key-file")
	if path == "" {
		return sec, nil
	}
	_, secret, err := readSecretKeyFile(c, "curve-secret-key-file", path)
	if err != nil {
		return sec, err
	}
	sec.CurveSecretKey = secret
	return sec, nil
}

// readSecretKeyFile reads the key pair file of flag --name. Like ssh with a private key, it
// refuses a file that group or others may read: the secret key in it may be known elsewhere.
func readSecretKeyFile(c *cli.Context, name, path string) (public, secret string, err error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", "", fmt.Errorf("key file: %w", err)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return "", "", fmt.Errorf("--%s %s: permissions %04o are too open: a secret key file must be readable by its owner only, so it is not used (chmod 600 %s)",
			name, path, perm, path)
	}
	public, secret, err = readKeyFile(path)
	if err != nil {
		return "", "", err
	}
	if secret == "" {
		return "", "", usagef(c, "--%s %s holds no secret key", name, path)
	}
	return public, secret, nil
}

// workerCurve is the worker.Curve of the worker flags, nil without --server-key.
func workerCurve(c *cli.Context) (*worker.Curve, error) {
	server, keyFile := c.String("server-key"), c.String("key-file")
	switch {
	case server == "" && keyFile == "":
		return nil, nil
	case server == "" || keyFile == "":
		return nil, usagef(c, "--server-key and --key-file go together")
	}
	serverKey, err := publicKeyArg(c, server)
	if err != nil {
		return nil, err
	}
	public, secret, err := readSecretKeyFile(c, "key-file", keyFile)
	if err != nil {
		return nil, err
	}
	return &worker.Curve{ServerKey: serverKey, PublicKey: public, SecretKey: secret}, nil
}
