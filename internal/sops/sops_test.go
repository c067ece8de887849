package sops_test

import (
	"bytes"
	"crypto/ecdh"
	"crypto/rand"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"filippo.io/age"
	. "github.com/onsi/gomega"
	"go.yaml.in/yaml/v3"

	"github.com/gitfleet/fleet/internal/sealing"
	"github.com/gitfleet/fleet/internal/sops"
)

// The fixtures in testdata were encrypted by the sops CLI (v3.13.3) for the
// test key in testdata/key.txt: plain.yaml as secret.sops.yaml (the
// defaults) and regex.sops.yaml (--encrypted-regex '^(data|stringData)$'
// --mac-only-encrypted), plain.json as values.sops.json, plain.bin as
// blob.sops (binary).

func testKey(t *testing.T) *ecdh.PrivateKey {
	t.Helper()
	b, err := os.ReadFile("testdata/key.txt")
	if err != nil {
		t.Fatal(err)
	}
	k, err := sealing.ParsePrivateKey(bytes.TrimSpace(b))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newKey(t *testing.T) *ecdh.PrivateKey {
	t.Helper()
	k, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sameYAML compares two YAML (or JSON) streams by value.
func sameYAML(g Gomega, got, want []byte) {
	decode := func(b []byte) []any {
		var out []any
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var v any
			if err := dec.Decode(&v); err != nil {
				break
			}
			out = append(out, v)
		}
		return out
	}
	g.Expect(decode(got)).To(Equal(decode(want)))
}

func TestRecipientIsAgesEncoding(t *testing.T) {
	g := NewWithT(t)
	k := newKey(t)
	r := sops.Recipient(k.PublicKey())
	g.Expect(r).To(HavePrefix("age1"))
	parsed, err := age.ParseX25519Recipient(r)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(parsed.String()).To(Equal(r))
	// The fixture key's recipient, as the sops CLI recorded it.
	g.Expect(sops.Recipient(testKey(t).PublicKey())).To(Equal("age1mpgedskrq4v23ckhmd4a0qsg2cugsvf639gf6dxg8mxrljhme30smatv2c"))
}

func TestDecryptFilesTheCLIEncrypted(t *testing.T) {
	for _, tc := range []struct{ encrypted, plain string }{
		{"secret.sops.yaml", "plain.yaml"},
		{"regex.sops.yaml", "plain.yaml"},
		{"values.sops.json", "plain.json"},
		{"blob.sops", "plain.bin"},
	} {
		t.Run(tc.encrypted, func(t *testing.T) {
			g := NewWithT(t)
			data := read(t, tc.encrypted)
			g.Expect(sops.Encrypted(tc.encrypted, data)).To(BeTrue())
			got, err := sops.Decrypt(tc.encrypted, data, []*ecdh.PrivateKey{testKey(t)})
			g.Expect(err).NotTo(HaveOccurred())
			if tc.plain == "plain.bin" {
				g.Expect(got).To(Equal(read(t, tc.plain)))
				return
			}
			sameYAML(g, got, read(t, tc.plain))
			g.Expect(string(got)).NotTo(ContainSubstring("ENC["))
		})
	}
}

func TestDecryptJSONStaysJSON(t *testing.T) {
	g := NewWithT(t)
	got, err := sops.Decrypt("values.sops.json", read(t, "values.sops.json"), []*ecdh.PrivateKey{testKey(t)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.TrimSpace(string(got))).To(HavePrefix(`{`))
	g.Expect(string(got)).To(ContainSubstring(`"port": 5432`))
	g.Expect(bytes.Index(got, []byte(`"user"`))).To(BeNumerically("<", bytes.Index(got, []byte(`"tags"`))))
}

func TestDecryptWithThePreviousKey(t *testing.T) {
	g := NewWithT(t)
	_, err := sops.Decrypt("secret.sops.yaml", read(t, "secret.sops.yaml"), []*ecdh.PrivateKey{newKey(t), testKey(t)})
	g.Expect(err).NotTo(HaveOccurred())
}

func TestNotARecipient(t *testing.T) {
	g := NewWithT(t)
	other := newKey(t)
	_, err := sops.Decrypt("secret.sops.yaml", read(t, "secret.sops.yaml"), []*ecdh.PrivateKey{other, nil})
	g.Expect(errors.Is(err, sops.ErrNotRecipient)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring(sops.Recipient(other.PublicKey())))
	g.Expect(err.Error()).To(ContainSubstring("age1mpgedskrq4v23ckhmd4a0qsg2cugsvf639gf6dxg8mxrljhme30smatv2c"))
}

func TestTamperingIsFound(t *testing.T) {
	key := []*ecdh.PrivateKey{testKey(t)}
	orig := string(read(t, "secret.sops.yaml"))
	for _, tc := range []struct {
		name   string
		change func(string) string
		macErr bool
	}{
		{"a plain value changed", func(s string) string {
			return strings.Replace(s, "left in plain text", "changed", 1)
		}, true},
		{"two list items swapped", func(s string) string {
			lines := strings.Split(s, "\n")
			for i, l := range lines {
				if strings.HasPrefix(strings.TrimSpace(l), "- ENC[") && strings.HasPrefix(strings.TrimSpace(lines[i+1]), "- ENC[") {
					lines[i], lines[i+1] = lines[i+1], lines[i]
					break
				}
			}
			return strings.Join(lines, "\n")
		}, true},
		{"a value moved to another key", func(s string) string {
			var pw string
			for _, l := range strings.Split(s, "\n") {
				if strings.HasPrefix(strings.TrimSpace(l), "password: ") {
					pw = strings.TrimPrefix(strings.TrimSpace(l), "password: ")
				}
			}
			return strings.Replace(s, "note_unencrypted: left in plain text", "note: "+pw, 1)
		}, false},
		{"an encrypted value removed", func(s string) string {
			var out []string
			for _, l := range strings.Split(s, "\n") {
				if !strings.HasPrefix(strings.TrimSpace(l), "ratio: ") {
					out = append(out, l)
				}
			}
			return strings.Join(out, "\n")
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			changed := tc.change(orig)
			g.Expect(changed).NotTo(Equal(orig))
			_, err := sops.Decrypt("secret.sops.yaml", []byte(changed), key)
			g.Expect(err).To(HaveOccurred())
			if tc.macErr {
				g.Expect(errors.Is(err, sops.ErrMACMismatch)).To(BeTrue(), "%v", err)
			}
			g.Expect(err.Error()).NotTo(ContainSubstring("s3cr3t"))
		})
	}
}

func TestEncryptedTellsSOPSFilesApart(t *testing.T) {
	g := NewWithT(t)
	g.Expect(sops.Encrypted("plain.yaml", read(t, "plain.yaml"))).To(BeFalse())
	g.Expect(sops.Encrypted("plain.json", read(t, "plain.json"))).To(BeFalse())
	g.Expect(sops.Encrypted("templates/cm.yaml", []byte("data:\n  mac: {{ .Values.sops }}\n  v: ENC[AES256_GCM,\n"))).To(BeFalse())
	g.Expect(sops.Encrypted("notes.yaml", []byte("sops:\n  mac: none\nvalue: ENC[AES256_GCM,x]\n"))).To(BeTrue())
	g.Expect(sops.Encrypted("app.env", []byte("A=ENC[AES256_GCM,data:x]\nsops_mac=ENC[x]\n"))).To(BeTrue())
	_, err := sops.Decrypt("app.env", []byte("A=ENC[AES256_GCM,data:x]\nsops_mac=ENC[x]\n"), []*ecdh.PrivateKey{testKey(t)})
	g.Expect(errors.Is(err, sops.ErrUnsupported)).To(BeTrue())
}

// sopsCLI is the sops binary `make test` passes (FLEET_SOPS), else the one
// `make sops` caches, else one on PATH. Without one the test fails: the
// comparison with the real CLI is what shows the format is read as sops
// writes it.
func sopsCLI(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("FLEET_SOPS"); p != "" {
		return p
	}
	if cache, err := os.UserCacheDir(); err == nil {
		if p := filepath.Join(cache, "gitfleet", "tools", "sops-v3.13.3", "sops"); fileExists(p) {
			return p
		}
	}
	p, err := exec.LookPath("sops")
	if err != nil {
		t.Fatal("no sops binary: run `make sops` (or `make test`, which builds it and sets FLEET_SOPS)")
	}
	return p
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestAgreesWithTheCLI encrypts documents with the sops CLI under its
// options and checks that Decrypt opens them to what the CLI's own decrypt
// gives.
func TestAgreesWithTheCLI(t *testing.T) {
	bin := sopsCLI(t)
	k := newKey(t)
	id := strings.ToUpper(sops.IdentityString(t, k))
	doc := "a: 1\nb:\n  c: [x, 2, 3.25, true]\n  d_unencrypted: plain\n  e: \"007\"\n---\nkind: Second\ndata:\n  key: value\n  n: -4\n"
	for _, args := range [][]string{
		nil,
		{"--encrypted-regex", "^(data|c)$"},
		{"--unencrypted-regex", "^kind$", "--mac-only-encrypted"},
		{"--encrypted-suffix", "c"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			g := NewWithT(t)
			dir := t.TempDir()
			plain := filepath.Join(dir, "doc.yaml")
			g.Expect(os.WriteFile(plain, []byte(doc), 0o600)).To(Succeed())
			cmd := exec.Command(bin, append(append([]string{"--encrypt", "--age", sops.Recipient(k.PublicKey())}, args...), plain)...)
			cmd.Env = append(os.Environ(), "SOPS_AGE_KEY=")
			enc, err := cmd.Output()
			g.Expect(err).NotTo(HaveOccurred())
			encPath := filepath.Join(dir, "doc.sops.yaml")
			g.Expect(os.WriteFile(encPath, enc, 0o600)).To(Succeed())
			cmd = exec.Command(bin, "--decrypt", encPath)
			cmd.Env = append(os.Environ(), "SOPS_AGE_KEY="+id)
			want, err := cmd.Output()
			g.Expect(err).NotTo(HaveOccurred())
			got, err := sops.Decrypt("doc.sops.yaml", enc, []*ecdh.PrivateKey{k})
			g.Expect(err).NotTo(HaveOccurred())
			sameYAML(g, got, want)
		})
	}
}
