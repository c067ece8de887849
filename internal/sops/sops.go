package sops

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"filippo.io/age"
	"filippo.io/age/armor"
	"go.yaml.in/yaml/v3"
)

// ErrNotRecipient says that none of the agent's keys is among the file's age
// recipients.
var ErrNotRecipient = errors.New("this cluster is not one of its age recipients")

// ErrMACMismatch says that the file's values do not match its MAC, so it was changed
// after it was encrypted.
var ErrMACMismatch = errors.New("its MAC does not match its values: it was changed after it was encrypted (encrypt it again with sops)")

// ErrUnsupported says that the file uses a part of SOPS the agent does not implement.
var ErrUnsupported = errors.New("unsupported SOPS file")

// macOnlyEncryptedInit starts the MAC of a file encrypted with
// mac_only_encrypted (the SHA-256 of "sops"), as SOPS does, so that the two
// kinds of MAC never collide.
var macOnlyEncryptedInit, _ = hex.DecodeString("8a3fd2ad54ce66527b1034f3d147be0b0b975b3bf44f72c6fdadec8176f27d69")

// format is a file's SOPS store, chosen by its extension as the sops CLI
// chooses it.
type format int

const (
	formatYAML format = iota
	formatJSON
	formatDotenv
	formatBinary
)

func formatOf(name string) format {
	switch strings.ToLower(path.Ext(name)) {
	case ".yaml", ".yml":
		return formatYAML
	case ".json":
		return formatJSON
	case ".env":
		return formatDotenv
	default:
		return formatBinary
	}
}

// Encrypted tells whether the bundle file name holds a SOPS-encrypted
// document: a mapping (in each YAML document, or the JSON object) with a
// top-level "sops" mapping that carries a "mac". It is cheap for files that
// are not.
func Encrypted(name string, data []byte) bool {
	if !bytes.Contains(data, []byte("sops")) || !bytes.Contains(data, []byte("mac")) {
		return false
	}
	if formatOf(name) == formatDotenv {
		return bytes.HasPrefix(data, []byte("sops_mac=")) || bytes.Contains(data, []byte("\nsops_mac="))
	}
	if !bytes.Contains(data, []byte("ENC[AES256_GCM,")) {
		return false
	}
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil {
		return false
	}
	meta := topLevel(&doc, "sops")
	return meta != nil && meta.Kind == yaml.MappingNode && child(meta, "mac") != nil
}

// Decrypt opens the SOPS file name with one of keys and checks its MAC; it
// returns the plain document in the file's own format (for a binary file,
// the bytes that were encrypted). Its errors say why it does not open and
// never hold a value of the file.
func Decrypt(name string, data []byte, keys []*ecdh.PrivateKey) ([]byte, error) {
	f := formatOf(name)
	if f == formatDotenv {
		return nil, fmt.Errorf("%w: dotenv SOPS files cannot be opened by the agent yet; encrypt the values in a YAML or JSON file instead", ErrUnsupported)
	}
	docs, err := parse(data)
	if err != nil {
		return nil, err
	}
	m, err := readMetadata(docs[0])
	if err != nil {
		return nil, err
	}
	dataKey, err := m.dataKey(keys)
	if err != nil {
		return nil, err
	}
	defer clear(dataKey)
	w, err := newWalker(m, dataKey)
	if err != nil {
		return nil, err
	}
	for _, d := range docs {
		dropTopLevel(d, "sops")
		if err := w.walk(d, nil); err != nil {
			return nil, err
		}
	}
	if err := w.verify(m); err != nil {
		return nil, err
	}
	switch f {
	case formatJSON:
		return emitJSON(docs[0])
	case formatBinary:
		return emitBinary(docs[0])
	default:
		return emitYAML(docs)
	}
}

// parse reads every YAML document of data (JSON is one).
func parse(data []byte) ([]*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yaml.Node
	for {
		d := &yaml.Node{}
		err := dec.Decode(d)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("it does not parse: %v", err)
		}
		docs = append(docs, d)
	}
	if len(docs) == 0 {
		return nil, errors.New("it is empty")
	}
	return docs, nil
}

// root is the top-level mapping of a document, nil when it has none.
func root(doc *yaml.Node) *yaml.Node {
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}
	if doc.Kind != yaml.MappingNode {
		return nil
	}
	return doc
}

// child is the value of key in mapping m, nil when it has none.
func child(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Kind == yaml.ScalarNode && m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func topLevel(doc *yaml.Node, key string) *yaml.Node {
	m := root(doc)
	if m == nil {
		return nil
	}
	return child(m, key)
}

func dropTopLevel(doc *yaml.Node, key string) {
	m := root(doc)
	if m == nil {
		return
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Kind == yaml.ScalarNode && m.Content[i].Value == key {
			m.Content = slices.Delete(m.Content, i, i+2)
			return
		}
	}
}

// ageKey is one age stanza of the metadata.
type ageKey struct {
	Recipient string `yaml:"recipient"`
	Enc       string `yaml:"enc"`
}

// metadata is the part of a file's "sops" block the agent reads.
type metadata struct {
	Age                     []ageKey               `yaml:"age"`
	KeyGroups               []map[string]yaml.Node `yaml:"key_groups"`
	LastModified            string                 `yaml:"lastmodified"`
	MAC                     string                 `yaml:"mac"`
	UnencryptedSuffix       string                 `yaml:"unencrypted_suffix"`
	EncryptedSuffix         string                 `yaml:"encrypted_suffix"`
	UnencryptedRegex        string                 `yaml:"unencrypted_regex"`
	EncryptedRegex          string                 `yaml:"encrypted_regex"`
	UnencryptedCommentRegex string                 `yaml:"unencrypted_comment_regex"`
	EncryptedCommentRegex   string                 `yaml:"encrypted_comment_regex"`
	MACOnlyEncrypted        bool                   `yaml:"mac_only_encrypted"`
}

func readMetadata(doc *yaml.Node) (*metadata, error) {
	n := topLevel(doc, "sops")
	if n == nil || n.Kind != yaml.MappingNode {
		return nil, errors.New("it has no sops metadata")
	}
	m := &metadata{}
	if err := n.Decode(m); err != nil {
		return nil, fmt.Errorf("its sops metadata does not parse: %v", err)
	}
	switch {
	case len(m.KeyGroups) > 1:
		return nil, fmt.Errorf("%w: its data key is split over %d key groups (Shamir); encrypt it with one group of age recipients", ErrUnsupported, len(m.KeyGroups))
	case m.UnencryptedCommentRegex != "" || m.EncryptedCommentRegex != "":
		return nil, fmt.Errorf("%w: it was encrypted with a comment regex; use encrypted_regex or a suffix instead", ErrUnsupported)
	case m.MAC == "":
		return nil, errors.New("its sops metadata has no mac")
	}
	if len(m.KeyGroups) == 1 {
		if a, ok := m.KeyGroups[0]["age"]; ok {
			var keys []ageKey
			if err := a.Decode(&keys); err != nil {
				return nil, fmt.Errorf("its sops key group does not parse: %v", err)
			}
			m.Age = append(m.Age, keys...)
		}
	}
	if len(m.Age) == 0 {
		return nil, fmt.Errorf("%w: it has no age recipient (only other key sources); encrypt it with `sops --encrypt --age $(fleet secret recipients ...)`", ErrUnsupported)
	}
	return m, nil
}

// dataKey opens the file's data key with the first of its age stanzas that
// one of keys opens.
func (m *metadata) dataKey(keys []*ecdh.PrivateKey) ([]byte, error) {
	ids, mine, err := identities(keys)
	if err != nil {
		return nil, err
	}
	listed := false
	for _, a := range m.Age {
		listed = listed || slices.Contains(mine, strings.TrimSpace(a.Recipient))
		var r io.Reader = strings.NewReader(a.Enc)
		if strings.HasPrefix(strings.TrimSpace(a.Enc), armor.Header) {
			r = armor.NewReader(strings.NewReader(strings.TrimSpace(a.Enc)))
		}
		plain, err := age.Decrypt(r, ids...)
		if err != nil {
			continue
		}
		key, err := io.ReadAll(plain)
		if err != nil || len(key) != 32 {
			clear(key)
			continue
		}
		return key, nil
	}
	if listed {
		return nil, fmt.Errorf("its age stanza for this cluster (%s) does not open: it is damaged; encrypt the file again", strings.Join(mine, ", "))
	}
	return nil, fmt.Errorf("%w: encrypted for %s, but this cluster is %s; add it with `sops updatekeys` or `sops --encrypt --age $(fleet secret recipients ...)`",
		ErrNotRecipient, shortList(m.Age), mine[0])
}

// shortList names at most three recipients.
func shortList(keys []ageKey) string {
	var rs []string
	for i, k := range keys {
		if i == 3 {
			rs = append(rs, fmt.Sprintf("and %d more", len(keys)-3))
			break
		}
		rs = append(rs, k.Recipient)
	}
	return strings.Join(rs, ", ")
}

// walker opens a document's values in place and hashes them, in document
// order, into the MAC.
type walker struct {
	m              *metadata
	key            []byte
	hash           hash.Hash
	unencRe, encRe *regexp.Regexp
}

func newWalker(m *metadata, key []byte) (*walker, error) {
	w := &walker{m: m, key: key, hash: sha512.New()}
	if m.MACOnlyEncrypted {
		w.hash.Write(macOnlyEncryptedInit)
	}
	var err error
	if m.UnencryptedRegex != "" {
		if w.unencRe, err = regexp.Compile(m.UnencryptedRegex); err != nil {
			return nil, fmt.Errorf("its unencrypted_regex does not compile: %v", err)
		}
	}
	if m.EncryptedRegex != "" {
		if w.encRe, err = regexp.Compile(m.EncryptedRegex); err != nil {
			return nil, fmt.Errorf("its encrypted_regex does not compile: %v", err)
		}
	}
	return w, nil
}

// encrypted tells whether the value at path is encrypted, by the file's
// rules: a key of the path ending in unencrypted_suffix or matching
// unencrypted_regex leaves it in plain text; with encrypted_suffix or
// encrypted_regex only values under a matching key are encrypted.
func (w *walker) encrypted(keys []string) bool {
	enc := true
	if s := w.m.UnencryptedSuffix; s != "" && slices.ContainsFunc(keys, func(k string) bool { return strings.HasSuffix(k, s) }) {
		enc = false
	}
	if s := w.m.EncryptedSuffix; s != "" {
		enc = slices.ContainsFunc(keys, func(k string) bool { return strings.HasSuffix(k, s) })
	}
	if w.unencRe != nil && slices.ContainsFunc(keys, w.unencRe.MatchString) {
		enc = false
	}
	if w.encRe != nil {
		enc = slices.ContainsFunc(keys, w.encRe.MatchString)
	}
	return enc
}

func (w *walker) walk(n *yaml.Node, keys []string) error {
	n.HeadComment, n.LineComment, n.FootComment = "", "", ""
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if err := w.walk(c, keys); err != nil {
				return err
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			k.HeadComment, k.LineComment, k.FootComment = "", "", ""
			if k.Kind != yaml.ScalarNode {
				return fmt.Errorf("it has a key that is not a string under %s", display(keys))
			}
			if err := w.walk(n.Content[i+1], append(slices.Clip(keys), k.Value)); err != nil {
				return err
			}
		}
	case yaml.SequenceNode:
		// SOPS gives the items of a list their list's path.
		for _, c := range n.Content {
			if err := w.walk(c, keys); err != nil {
				return err
			}
		}
	case yaml.AliasNode:
		return fmt.Errorf("%w: it uses a YAML alias at %s", ErrUnsupported, display(keys))
	case yaml.ScalarNode:
		return w.leaf(n, keys)
	}
	return nil
}

func display(keys []string) string {
	if len(keys) == 0 {
		return "the top level"
	}
	return strings.Join(keys, ".")
}

// leaf opens one value when it is encrypted and adds it to the MAC.
func (w *walker) leaf(n *yaml.Node, keys []string) error {
	if n.ShortTag() == "!!null" {
		return nil // SOPS neither encrypts nor hashes nulls
	}
	enc := w.encrypted(keys)
	var macBytes []byte
	if enc {
		if n.ShortTag() != "!!str" {
			return fmt.Errorf("the value at %s should be encrypted but is not", display(keys))
		}
		if n.Value != "" { // SOPS leaves empty strings as they are
			b, err := w.open(n, keys)
			if err != nil {
				return err
			}
			macBytes = b
		}
	} else {
		var v any
		if err := n.Decode(&v); err != nil {
			return fmt.Errorf("the value at %s does not parse: %v", display(keys), err)
		}
		b, err := plainBytes(v)
		if err != nil {
			return fmt.Errorf("the value at %s: %v", display(keys), err)
		}
		macBytes = b
	}
	if !w.m.MACOnlyEncrypted || enc {
		w.hash.Write(macBytes)
	}
	return nil
}

// plainBytes is how SOPS hashes a value it left in plain text.
func plainBytes(v any) ([]byte, error) {
	switch v := v.(type) {
	case string:
		return []byte(v), nil
	case []byte:
		return v, nil
	case int:
		return []byte(strconv.Itoa(v)), nil
	case float64:
		return []byte(strconv.FormatFloat(v, 'f', -1, 64)), nil
	case bool:
		if v {
			return []byte("True"), nil
		}
		return []byte("False"), nil
	default:
		return nil, fmt.Errorf("SOPS cannot hash a value of type %T", v)
	}
}

var encRe = regexp.MustCompile(`^ENC\[AES256_GCM,data:(.*),iv:(.+),tag:(.+),type:(.+)\]$`)

// decryptValue opens one ENC[...] value with additional data ad; it
// returns the plain bytes and their type.
func decryptValue(key []byte, value, ad string) ([]byte, string, error) {
	m := encRe.FindStringSubmatch(value)
	if m == nil {
		return nil, "", errors.New("is not in SOPS's ENC[AES256_GCM,...] format")
	}
	var parts [3][]byte
	for i := range parts {
		b, err := base64.StdEncoding.DecodeString(m[i+1])
		if err != nil {
			return nil, "", errors.New("is not valid base64 in its ENC[...] value")
		}
		parts[i] = b
	}
	data, iv, tag := parts[0], parts[1], parts[2]
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, "", err
	}
	if len(iv) == 0 || len(tag) != 16 {
		return nil, "", errors.New("has a malformed iv or tag")
	}
	gcm, err := cipher.NewGCMWithNonceSize(block, len(iv))
	if err != nil {
		return nil, "", err
	}
	plain, err := gcm.Open(nil, iv, append(data, tag...), []byte(ad))
	if err != nil {
		return nil, "", errors.New("does not open with the file's data key: it was changed or moved after it was encrypted")
	}
	return plain, m[4], nil
}

// open decrypts the value of n in place and returns the bytes SOPS hashed.
func (w *walker) open(n *yaml.Node, keys []string) ([]byte, error) {
	plain, typ, err := decryptValue(w.key, n.Value, strings.Join(keys, ":")+":")
	if err != nil {
		return nil, fmt.Errorf("the value at %s %w", display(keys), err)
	}
	n.Style = 0
	bad := func() error {
		return fmt.Errorf("the value at %s does not hold the %s its type says", display(keys), typ)
	}
	switch typ {
	case "str":
		n.Tag, n.Value = "!!str", string(plain)
		return plain, nil
	case "int", "int64":
		i, err := strconv.ParseInt(string(plain), 10, 64)
		if err != nil {
			return nil, bad()
		}
		s := strconv.FormatInt(i, 10)
		n.Tag, n.Value = "!!int", s
		return []byte(s), nil
	case "float":
		f, err := strconv.ParseFloat(string(plain), 64)
		if err != nil {
			return nil, bad()
		}
		s := strconv.FormatFloat(f, 'f', -1, 64)
		n.Tag, n.Value = "!!float", s
		return []byte(s), nil
	case "bool":
		b, err := strconv.ParseBool(string(plain))
		if err != nil {
			return nil, bad()
		}
		n.Tag, n.Value = "!!bool", strconv.FormatBool(b)
		if b {
			return []byte("True"), nil
		}
		return []byte("False"), nil
	case "bytes":
		if utf8.Valid(plain) {
			n.Tag, n.Value = "!!str", string(plain)
		} else {
			n.Tag, n.Value = "!!binary", base64.StdEncoding.EncodeToString(plain)
		}
		return plain, nil
	default:
		return nil, fmt.Errorf("the value at %s has an unknown type %q", display(keys), typ)
	}
}

// verify compares the hash of the values with the file's MAC.
func (w *walker) verify(m *metadata) error {
	lm, err := time.Parse(time.RFC3339, m.LastModified)
	if err != nil {
		return errors.New("its sops lastmodified is not an RFC 3339 time")
	}
	want, _, err := decryptValue(w.key, m.MAC, lm.Format(time.RFC3339))
	if err != nil {
		return fmt.Errorf("%w (its mac %v)", ErrMACMismatch, err)
	}
	got := strings.ToUpper(hex.EncodeToString(w.hash.Sum(nil)))
	if subtle.ConstantTimeCompare([]byte(got), []byte(strings.ToUpper(string(want)))) != 1 {
		return ErrMACMismatch
	}
	return nil
}
