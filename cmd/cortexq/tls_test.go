package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/cortexq/cortexq/queue/pgembed"
	"github.com/cortexq/cortexq/queue/queuetest"
)

// loopbackHost is an address of 127/8 of its own for a test cluster that listens on TCP: every
// test cluster keeps port 5432 (its unix socket's name), so each needs an address.
func loopbackHost() string {
	return fmt.Sprintf("127.%d.%d.%d", 1+mrand.IntN(250), mrand.IntN(256), 2+mrand.IntN(250))
}

// certPair is a PEM certificate and its key.
type certPair struct{ cert, key []byte }

// issue makes a certificate for tmpl signed by parent (self-signed when parent is nil).
func issue(t *testing.T, tmpl *x509.Certificate, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (certPair, *x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl.SerialNumber = big.NewInt(mrand.Int64())
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return certPair{pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})}, cert, key
}

// writeFile writes data to path, mode 0600, owned by the server's user when own is set.
func writeFile(t *testing.T, path string, data []byte, own bool) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, data, 0o600))
	if cred, err := pgembed.ServerCredential(); own && err == nil && cred != nil {
		require.NoError(t, os.Chown(path, int(cred.Uid), int(cred.Gid)))
	}
}

// tlsCluster starts a cluster that takes TCP connections on host only over TLS with a client
// certificate (pg_hba: hostssl ... cert, so the certificate's CN is the role), its server
// certificate and the clients' made here by a CA of the test's. It returns the cluster and the
// verify-full connection string of database db as user, with that user's certificate.
func tlsCluster(t *testing.T) (*queuetest.Cluster, func(db, user string) string) {
	t.Helper()
	host := loopbackHost()
	cl := queuetest.NewClusterWith(t, "listen_addresses = '"+host+"'")
	ca, caCert, caKey := issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: "cortexq test CA"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}, nil, nil)
	server, _, _ := issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: host}, IPAddresses: []net.IP{net.ParseIP(host)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}, caCert, caKey)
	data := cl.DataDir()
	writeFile(t, filepath.Join(data, "server.crt"), server.cert, true)
	writeFile(t, filepath.Join(data, "server.key"), server.key, true)
	writeFile(t, filepath.Join(data, "root.crt"), ca.cert, true)
	writeFile(t, filepath.Join(data, "pg_hba.conf"), []byte("local all all trust\nlocal replication all trust\nhostssl all all 127.0.0.0/8 cert\n"), true)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, cl.AdminDSN())
	require.NoError(t, err)
	defer conn.Close(ctx)
	for _, stmt := range []string{"ALTER SYSTEM SET ssl = on", "ALTER SYSTEM SET ssl_cert_file = 'server.crt'",
		"ALTER SYSTEM SET ssl_key_file = 'server.key'", "ALTER SYSTEM SET ssl_ca_file = 'root.crt'", "SELECT pg_reload_conf()"} {
		_, err := conn.Exec(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "root.crt"), ca.cert, false)
	return cl, func(db, user string) string {
		client, _, _ := issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: user},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature}, caCert, caKey)
		writeFile(t, filepath.Join(dir, user+".crt"), client.cert, false)
		writeFile(t, filepath.Join(dir, user+".key"), client.key, false)
		return fmt.Sprintf("postgres://%s@%s:5432/%s?sslmode=verify-full&sslrootcert=%s&sslcert=%s&sslkey=%s", user, host, db,
			filepath.Join(dir, "root.crt"), filepath.Join(dir, user+".crt"), filepath.Join(dir, user+".key"))
	}
}

// TestTLSVerifyFull runs the commands over TLS with sslmode=verify-full and client
// certificates (no password: pg_hba's cert method), against a cluster that takes nothing else
// over TCP: migrations as the owner, a replica role made by grant-replica, a bench (replicas and
// workers to completion), status, report, runs, task show and the dashboard. A connection
// string without the client certificate is refused.
func TestTLSVerifyFull(t *testing.T) {
	t.Parallel()
	cl, dsn := tlsCluster(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, cl.AdminDSN())
	require.NoError(t, err)
	_, err = conn.Exec(ctx, "CREATE DATABASE tls")
	require.NoError(t, err)
	conn.Close(ctx)
	owner := &testDB{t: t, env: []string{"DATABASE_URL=" + dsn("tls", "postgres")}}
	require.Contains(t, owner.ok("migrate", "up"), "00025")
	require.Contains(t, owner.ok("db", "grant-replica", "tls_replica", "--login"), "role tls_replica created (LOGIN)")
	out := owner.ok("bench", "--tasks", "100", "--workers", "2", "--payload-kb", "1", "--dir", t.TempDir())
	require.Contains(t, out, "gates: lost 0, NoProblem 100 of 100, archives differing 0 → ok")
	corpus := regexp.MustCompile(`bench-[0-9.-]+`).FindString(owner.ok("status"))
	require.NotEmpty(t, corpus)
	require.Contains(t, owner.ok("report", "--corpus", corpus, "--service", "bench_echo"), "no_problem  100")
	require.Contains(t, owner.ok("runs", "--corpus", corpus, "--service", "bench_echo"), "100 (100.00%)")
	require.Contains(t, owner.ok("task", "show", "1"), "status   no_problem (-1)")

	// The replica's role, over TLS with its own certificate: its dashboard and a rerun.
	rep := &testDB{t: t, env: []string{"DATABASE_URL=" + dsn("tls", "tls_replica")}}
	require.Contains(t, rep.ok("rerun", "--yes", "--corpus", corpus, "--service", "bench_echo", "--severity", "no_problem"), "100")
	web, base := rep.startWeb()
	code, body := get(t, base+"/report?corpus="+corpus+"&service=bench_echo")
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, 0, web.stop(syscall.SIGTERM, 10*time.Second))

	// Without a client certificate, or trusting another CA, the server or the client refuses.
	r := cortexq(t, []string{"DATABASE_URL=" + regexp.MustCompile(`&sslcert=.*`).ReplaceAllString(dsn("tls", "postgres"), "")}, "status")
	require.Equal(t, 1, r.code, r.stderr)
	require.Contains(t, r.stderr, "connection requires a valid client certificate", r.stderr)
}
