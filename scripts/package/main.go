// Command package builds cortexq's Debian package from nfpm.yaml beside it, with nfpm (a Go
// library) rather than dpkg-deb, so that any machine with Go builds it for any architecture.
// scripts/release runs it; see docs/operations.md#the-debian-package.
//
//	go run . -version v0.2.0 -arch amd64 -binary ../../dist/cortexq-v0.2.0-linux-amd64 -out ../../dist
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the deb packager
)

func main() {
	version := flag.String("version", "", "release, such as v0.2.0 (the package's version drops the v)")
	arch := flag.String("arch", "amd64", "Debian architecture: amd64 or arm64")
	binary := flag.String("binary", "", "the cortexq binary built for -arch")
	out := flag.String("out", ".", "directory the .deb goes to")
	flag.Parse()
	if err := build(*version, *arch, *binary, *out); err != nil {
		fmt.Fprintf(os.Stderr, "package: %v\n", err)
		os.Exit(1)
	}
}

func build(version, arch, binary, out string) error {
	if !strings.HasPrefix(version, "v") || binary == "" {
		return fmt.Errorf("want -version vX.Y.Z and -binary PATH")
	}
	bin, err := filepath.Abs(binary)
	if err != nil {
		return err
	}
	env := map[string]string{"CORTEXQ_VERSION": strings.TrimPrefix(version, "v"), "CORTEXQ_ARCH": arch, "CORTEXQ_BINARY": bin}
	config, err := nfpm.ParseFileWithEnvMapping("nfpm.yaml", func(k string) string { return env[k] })
	if err != nil {
		return fmt.Errorf("nfpm.yaml: %w", err)
	}
	info, err := config.Get("deb")
	if err != nil {
		return err
	}
	info = nfpm.WithDefaults(info)
	if err := nfpm.PrepareForPackager(info, "deb"); err != nil {
		return err
	}
	pkg, err := nfpm.Get("deb")
	if err != nil {
		return err
	}
	target := filepath.Join(out, pkg.ConventionalFileName(info))
	f, err := os.Create(target)
	if err != nil {
		return err
	}
	defer f.Close()
	info.Target = target
	if err := pkg.Package(info, f); err != nil {
		os.Remove(target)
		return fmt.Errorf("package: %w", err)
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Println(target)
	return nil
}
