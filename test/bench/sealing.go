package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// The sealing experiment's bundles: sealedAll targets every cluster,
// sealedProd the env=prod third; each names sealedSources Secrets of its
// own in downstreamResources, of sealedSecretBytes plain bytes each.
const (
	sealedAll         = "sealed-all"
	sealedProd        = "sealed-prod"
	sealedSources     = 10
	sealedSecretBytes = 256
)

// sealedSource is the name of source j of bundle.
func sealedSource(bundle string, j int) string { return fmt.Sprintf("%s-%d", bundle, j) }

// Sealing measures what downstreamResources sealed per cluster cost the
// manager (its downstreamresource controller): every simulated agent
// publishes a sealing key on its Lease, then two bundles naming 10 Secrets
// each are sealed for each of their clusters (seal-fanout: how long, and
// the bytes a seal adds to a BundleDeployment); then one source of each
// bundle changes (reseal-prod, reseal-all): the manager's CPU for the
// change, and the BundleDeployments written again, counted by their
// generation, which only a spec write moves: those naming the source, and
// none of the others.
func (f *fleetRun) Sealing(ctx context.Context) error {
	fmt.Fprintf(os.Stderr, "Publishing a sealing key for each of %d simulated agents\n", len(f.agents))
	if err := parallel(32, len(f.agents), func(i int) error {
		_, err := f.agents[i].PublishSealingKey(ctx)
		return err
	}); err != nil {
		return fmt.Errorf("publishing the agents' sealing keys: %w", err)
	}
	for _, bundle := range []string{sealedAll, sealedProd} {
		for j := range sealedSources {
			value := make([]byte, sealedSecretBytes*3/4)
			_, _ = rand.Read(value)
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: fleet.DefaultWorkspace, Name: sealedSource(bundle, j)},
				Data: map[string][]byte{"password": []byte(base64.StdEncoding.EncodeToString(value))}}
			if err := f.c.Create(ctx, s); err != nil {
				return err
			}
		}
	}
	waitWritesSettle(ctx, f.cp, 3*time.Second, time.Minute)

	want := map[string]int{sealedAll: len(f.agents)}
	for i := range f.agents {
		if i%3 == 2 { // env=prod, as Register labels them
			want[sealedProd]++
		}
	}
	fmt.Fprintf(os.Stderr, "Creating bundles %s (%d clusters) and %s (%d clusters) with %d downstream Secrets each\n",
		sealedAll, want[sealedAll], sealedProd, want[sealedProd], sealedSources)
	f.mark(ctx)
	cpu := cpuSeconds(f.mgr)
	start := time.Now()
	for bundle, selector := range map[string]map[string]string{sealedAll: {"bench": "true"}, sealedProd: {"env": "prod"}} {
		if err := f.c.Create(ctx, sealedBundle(bundle, selector)); err != nil {
			return err
		}
	}
	var bds []fleet.BundleDeployment
	if err := waitEvery(ctx, 500*time.Millisecond, 15*time.Minute, func() (bool, error) {
		var err error
		bds, err = f.sealedBDs(ctx)
		if err != nil {
			return false, err
		}
		sealed := map[string]int{}
		for _, bd := range bds {
			if s := bd.Spec.SealedResources; s != nil && s.Data != "" && len(s.Sources) == sealedSources {
				sealed[bd.Labels[fleet.BundleNameLabel]]++
			}
		}
		return sealed[sealedAll] == want[sealedAll] && sealed[sealedProd] == want[sealedProd], nil
	}); err != nil {
		return fmt.Errorf("waiting for %d and %d sealed BundleDeployments: %w", want[sealedAll], want[sealedProd], err)
	}
	s := since(start)
	waitWritesSettle(ctx, f.cp, 3*time.Second, time.Minute)
	total := want[sealedAll] + want[sealedProd]
	r := f.measure(Result{Experiment: "seal-fanout", Objects: total, Seconds: s, Rate: float64(total) / s}, cpu)
	r.Bundles = 2
	sealedBytes, bdBytes := 0, 0
	for _, bd := range bds {
		b, err := json.Marshal(bd.Spec.SealedResources)
		if err != nil {
			return err
		}
		sealedBytes += len(b)
		if b, err = json.Marshal(bd); err != nil {
			return err
		}
		bdBytes += len(b)
	}
	r.SealedBytesPerBD = float64(sealedBytes) / float64(len(bds))
	r.Note = fmt.Sprintf("%d BundleDeployments made and sealed, %d Secrets of %d plain bytes each: spec.sealedResources adds %.0f bytes to a BundleDeployment (%.0f bytes in all with it); manager CPU %.2f ms per BundleDeployment made and sealed",
		total, sealedSources, sealedSecretBytes, r.SealedBytesPerBD, float64(bdBytes)/float64(len(bds)), 1000*r.ManagerCPUS/float64(total))
	f.results = append(f.results, r)
	printJSON(r)

	for _, change := range []struct{ experiment, bundle string }{{"reseal-prod", sealedProd}, {"reseal-all", sealedAll}} {
		if err := f.reseal(ctx, change.experiment, change.bundle, want); err != nil {
			return fmt.Errorf("%s: %w", change.experiment, err)
		}
	}
	return nil
}

// sealedBundle is a bundle of one small ConfigMap naming its sealedSources
// Secrets in downstreamResources, targeting the clusters labelled selector.
func sealedBundle(name string, selector map[string]string) *fleet.Bundle {
	b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fleet.DefaultWorkspace},
		Spec: fleet.BundleSpec{
			Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: fmt.Sprintf(
				"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\ndata: {reads: secrets}\n", name)}},
			Targets: []fleet.BundleTarget{{Name: "sealed", ClusterSelector: &metav1.LabelSelector{MatchLabels: selector}}},
		}}
	for j := range sealedSources {
		b.Spec.DownstreamResources = append(b.Spec.DownstreamResources, fleet.DownstreamResource{Kind: "Secret", Name: sealedSource(name, j)})
	}
	return b
}

// sealedBDs lists the BundleDeployments of the sealing experiment's bundles.
func (f *fleetRun) sealedBDs(ctx context.Context) ([]fleet.BundleDeployment, error) {
	var out []fleet.BundleDeployment
	for _, bundle := range []string{sealedAll, sealedProd} {
		list := &fleet.BundleDeploymentList{}
		if err := f.c.List(ctx, list, client.MatchingLabels{fleet.BundleNameLabel: bundle}); err != nil {
			return nil, err
		}
		out = append(out, list.Items...)
	}
	return out, nil
}

// reseal changes source 3 of bundle and measures until every
// BundleDeployment of bundle holds it sealed again and the writes settled:
// the manager's CPU for the change, and which BundleDeployments were
// written again (their generation moved), of bundle and of the other.
func (f *fleetRun) reseal(ctx context.Context, experiment, bundle string, want map[string]int) error {
	before, err := f.sealedBDs(ctx)
	if err != nil {
		return err
	}
	generation := map[types.NamespacedName]int64{}
	for _, bd := range before {
		generation[client.ObjectKeyFromObject(&bd)] = bd.Generation
	}
	src := &corev1.Secret{}
	if err := f.c.Get(ctx, types.NamespacedName{Namespace: fleet.DefaultWorkspace, Name: sealedSource(bundle, 3)}, src); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "Changing Secret %s, which the %d BundleDeployments of %s name\n", src.Name, want[bundle], bundle)
	f.mark(ctx)
	cpu := cpuSeconds(f.mgr)
	start := time.Now()
	src.Data["password"] = []byte(strings.Repeat("r", sealedSecretBytes))
	if err := f.c.Update(ctx, src); err != nil {
		return err
	}
	version := "Secret/" + src.Name + " " + string(src.UID) + " " + src.ResourceVersion
	if err := waitEvery(ctx, 200*time.Millisecond, 10*time.Minute, func() (bool, error) {
		bds, err := f.sealedBDs(ctx)
		if err != nil {
			return false, err
		}
		n := 0
		for _, bd := range bds {
			if s := bd.Spec.SealedResources; s != nil && bd.Labels[fleet.BundleNameLabel] == bundle && slices.Contains(s.Sources, version) {
				n++
			}
		}
		return n == want[bundle], nil
	}); err != nil {
		return fmt.Errorf("waiting for the %d BundleDeployments of %s to hold %s sealed again: %w", want[bundle], bundle, version, err)
	}
	s := since(start)
	// Writes that come after (none are expected) are counted too.
	waitWritesSettle(ctx, f.cp, 3*time.Second, time.Minute)
	after, err := f.sealedBDs(ctx)
	if err != nil {
		return err
	}
	written := map[string]int{}
	specWrites := map[string]int64{}
	for _, bd := range after {
		if d := bd.Generation - generation[client.ObjectKeyFromObject(&bd)]; d > 0 {
			written[bd.Labels[fleet.BundleNameLabel]]++
			specWrites[bd.Labels[fleet.BundleNameLabel]] += d
		}
	}
	other := sealedAll
	if bundle == sealedAll {
		other = sealedProd
	}
	r := f.measure(Result{Experiment: experiment, Objects: want[bundle], Seconds: s, Rate: float64(want[bundle]) / s}, cpu)
	r.Bundles = 2
	r.Resealed, r.ResealedOther = written[bundle], written[other]
	r.Note = fmt.Sprintf("one source Secret of %s changed: %d of its %d BundleDeployments sealed again (%d spec writes), %d of the %d of %s; manager CPU %.2f s for the change, %.2f ms per BundleDeployment sealed again",
		bundle, written[bundle], want[bundle], specWrites[bundle], written[other], want[other], other, r.ManagerCPUS, 1000*r.ManagerCPUS/float64(max(written[bundle], 1)))
	f.results = append(f.results, r)
	printJSON(r)
	if written[bundle] != want[bundle] || written[other] != 0 || specWrites[bundle] != int64(want[bundle]) {
		return fmt.Errorf("a change of one source should write each BundleDeployment naming it once and no other: %s", r.Note)
	}
	return nil
}
