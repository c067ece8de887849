package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The API server's request counters have no namespace or user, so who
// wrote where is counted from its audit log: one line per write, at level
// Metadata (who, verb, object reference; no bodies).
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`

// auditLog is the bench API server's audit log.
type auditLog struct {
	dir, path string
	// admin is the bench's own user (it shares it with nothing but the
	// manager, known by its user agent).
	admin string
}

// auditArgs writes the policy into dir and returns the kube-apiserver flags
// that log writes to dir/audit.log.
func auditArgs(dir string) (*auditLog, map[string][]string, error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return nil, nil, err
	}
	a := &auditLog{dir: dir, path: filepath.Join(dir, "audit.log")}
	return a, map[string][]string{
		"audit-policy-file": {policy}, "audit-log-path": {a.path}, "audit-log-format": {"json"},
		"audit-log-maxsize": {"0"}, "audit-log-mode": {"blocking"},
	}, nil
}

// remove deletes the log and its policy (nil: nothing to do).
func (a *auditLog) remove() {
	if a != nil {
		_ = os.RemoveAll(a.dir)
	}
}

// learnAdmin asks the API server who the bench's admin client is.
func (a *auditLog) learnAdmin(ctx context.Context, cfg *rest.Config) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	r, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("asking who the admin client is: %w", err)
	}
	a.admin = r.Status.UserInfo.Username
	return nil
}

// offset is where the log ends now: a window's events come after it.
func (a *auditLog) offset() int64 {
	if a == nil {
		return 0
	}
	st, err := os.Stat(a.path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// auditEvent is the part of an audit.k8s.io/v1 Event counted here.
type auditEvent struct {
	Stage     string `json:"stage"`
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	User      struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	StageTimestamp metav1.MicroTime `json:"stageTimestamp"`
}

// namespaceKinds tells the kind of a namespace: "cluster" (a cluster's
// own), "workspace" (shared by every cluster of a workspace), "none"
// (cluster-scoped objects) or "other".
type namespaceKinds struct{ cluster, workspace map[string]bool }

func (k namespaceKinds) of(ns string) string {
	switch {
	case ns == "":
		return "none"
	case k.cluster[ns]:
		return "cluster"
	case k.workspace[ns]:
		return "workspace"
	}
	return "other"
}

// auditCounts are the writes of a window by writer ("manager", "agent",
// "downstream", "bench", "system") and namespace kind, and by a finer key for the text.
type auditCounts struct {
	byWriter map[string]map[string]int
	byKey    map[string]int
}

func (c auditCounts) writer(w string) int {
	n := 0
	for _, v := range c.byWriter[w] {
		n += v
	}
	return n
}

// text is the writes most first: "agent cluster PATCH leases 1000, ...".
func (c auditCounts) text() string {
	keys := make([]string, 0, len(c.byKey))
	total := 0
	for k, v := range c.byKey {
		keys = append(keys, k)
		total += v
	}
	sort.Slice(keys, func(i, j int) bool { return c.byKey[keys[i]] > c.byKey[keys[j]] })
	parts := make([]string, 0, 12)
	for i, k := range keys {
		if i == 12 {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %d", k, c.byKey[k]))
	}
	return fmt.Sprintf("audited writes %d: %s", total, strings.Join(parts, ", "))
}

// count reads the writes logged after offset that completed by end.
func (a *auditLog) count(offset int64, end time.Time, kinds namespaceKinds) (auditCounts, error) {
	f, err := os.Open(a.path)
	if err != nil {
		return auditCounts{}, err
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return auditCounts{}, err
	}
	return countAudit(f, end, a.admin, kinds)
}

// countAudit counts the write events of r (JSON lines) that completed by
// end, known as the bench's own when made by admin.
func countAudit(r io.Reader, end time.Time, admin string, kinds namespaceKinds) (auditCounts, error) {
	c := auditCounts{byWriter: map[string]map[string]int{}, byKey: map[string]int{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.Stage != "ResponseComplete" || ev.ObjectRef == nil {
			continue
		}
		if !end.IsZero() && ev.StageTimestamp.After(end) {
			continue
		}
		w := writerOf(ev, admin)
		ns := kinds.of(ev.ObjectRef.Namespace)
		if c.byWriter[w] == nil {
			c.byWriter[w] = map[string]int{}
		}
		c.byWriter[w][ns]++
		res := ev.ObjectRef.Resource
		if ev.ObjectRef.Subresource != "" {
			res += "/" + ev.ObjectRef.Subresource
		}
		where := ns
		if ns == "other" {
			// Which other: digits stand for the many alike (sim-#).
			where += ":" + strings.Map(func(r rune) rune {
				if r >= '0' && r <= '9' {
					return '#'
				}
				return r
			}, ev.ObjectRef.Namespace)
		}
		key := fmt.Sprintf("%s %s %s %s", w, where, ev.Verb, res)
		if ev.ResponseStatus != nil && ev.ResponseStatus.Code >= 300 {
			key += fmt.Sprintf(" (%d)", ev.ResponseStatus.Code)
		}
		c.byKey[key]++
	}
	return c, sc.Err()
}

// writerOf tells who made a request: the manager by its user agent (it
// runs with the admin's kubeconfig); "downstream" for what the simulated
// agents write into their own clusters' system namespaces (sim-<i>), which
// the bench hosts on this API server with the admin user, though a real
// agent writes them into its own cluster; the bench by the admin user; the
// API server's own loopback user; and everyone else is an agent
// (registering with its token, then with its own credential).
func writerOf(ev auditEvent, admin string) string {
	u := ev.User.Username
	switch {
	case strings.HasPrefix(ev.UserAgent, "fleet-manager"):
		return "manager"
	case u == admin && strings.HasPrefix(ev.ObjectRef.Namespace, "sim-"):
		return "downstream"
	case u == admin:
		return "bench"
	case strings.HasPrefix(u, "system:") && !strings.HasPrefix(u, "system:serviceaccount:"):
		return "system"
	}
	return "agent"
}
