package agentmanifest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// DefaultImage is the agent image used when none is given: the name `make
// images` gives the agent's image layout.
const DefaultImage = "ghcr.io/gitfleet/fleet-agent:latest"

// Keys of the fleet-agent-bootstrap Secret.
const (
	BootstrapAPIServerURLKey                = "apiServerURL"
	BootstrapAPIServerCAKey                 = "apiServerCA"
	BootstrapTokenKey                       = "token"
	BootstrapClusterNamespaceKey            = "clusterNamespace"
	BootstrapSystemRegistrationNamespaceKey = "systemRegistrationNamespace"
	BootstrapTokenNameKey                   = "tokenName"
)

// ConfigKey is the key of the fleet-agent ConfigMap that holds AgentConfig.
const ConfigKey = "config"

// ManagedByLabel marks what the installer created downstream.
const ManagedByLabel = "app.kubernetes.io/managed-by"

// Bootstrap is what an agent needs to register: where the manager is, how to
// trust it, and a registration token. It is the `values` of a
// ClusterRegistrationToken's Secret.
type Bootstrap struct {
	APIServerURL                string `json:"apiServerURL"`
	APIServerCA                 string `json:"apiServerCA,omitempty"`
	Token                       string `json:"token"`
	ClusterNamespace            string `json:"clusterNamespace"`
	SystemRegistrationNamespace string `json:"systemRegistrationNamespace"`
	TokenName                   string `json:"tokenName,omitempty"`
}

// Validate says what is missing.
func (b *Bootstrap) Validate() error {
	var errs []error
	if b.APIServerURL == "" {
		errs = append(errs, errors.New("the manager's API server URL is empty: pass --server-url or configure the manager's --api-server-url"))
	}
	if b.Token == "" {
		errs = append(errs, errors.New("the registration token is empty"))
	}
	if b.ClusterNamespace == "" {
		errs = append(errs, errors.New("the cluster namespace is empty"))
	}
	if b.SystemRegistrationNamespace == "" {
		errs = append(errs, errors.New("the system registration namespace is empty"))
	}
	return errors.Join(errs...)
}

// AgentConfig is what a cluster says about itself when it registers.
type AgentConfig struct {
	// Labels become the Cluster's labels at registration (only then).
	Labels map[string]string `json:"labels,omitempty"`
	// ClientID overrides the cluster identity (default: the kube-system UID).
	ClientID string `json:"clientID,omitempty"`
	// CheckinInterval is how often the agent reports it is alive (e.g. "15m").
	CheckinInterval string `json:"checkinInterval,omitempty"`
	// AgentTLSMode is how the agent trusts the manager's API server:
	// TLSModeStrict (the default) or TLSModeSystemStore.
	AgentTLSMode string `json:"agentTLSMode,omitempty"`
	// GarbageCollectionInterval is how often the agent looks for Helm
	// releases it deployed that no BundleDeployment asks for any more
	// (e.g. "15m").
	GarbageCollectionInterval string `json:"garbageCollectionInterval,omitempty"`
}

// Validate checks the labels the way the API server would.
func (c *AgentConfig) Validate() error {
	var errs []error
	for k, v := range c.Labels {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, fmt.Errorf("label key %q: %s", k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, fmt.Errorf("label %q value %q: %s", k, v, msg))
		}
	}
	if err := ValidateTLSMode(c.AgentTLSMode); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Options describe one agent installation.
type Options struct {
	// Namespace is the downstream system namespace (default fleet-system).
	Namespace string
	// Image is the agent image (default DefaultImage); PrivateRepoURL, when
	// set, replaces its registry.
	Image           string
	PrivateRepoURL  string
	ImagePullPolicy corev1.PullPolicy
	// Bootstrap, when set, adds the fleet-agent-bootstrap Secret.
	Bootstrap *Bootstrap
	// Config, when set, adds the fleet-agent ConfigMap.
	Config *AgentConfig
	// Deployment settings, as in a Cluster's spec.
	EnvVars     []corev1.EnvVar
	Tolerations []corev1.Toleration
	Affinity    *corev1.Affinity
	Resources   *corev1.ResourceRequirements
	HostNetwork bool
	// Scheduling, when set, adds the agent's PriorityClass and
	// PodDisruptionBudget.
	Scheduling *fleet.AgentSchedulingCustomization
	// ImagePullSecrets name Secrets in Namespace the agent's image is pulled
	// with; PullSecrets are Secrets copied into Namespace (their name, type
	// and data), e.g. the manager's own pull secrets.
	ImagePullSecrets []string
	PullSecrets      []*corev1.Secret
	// NoDeployment leaves the Deployment (and its RBAC) out, as
	// `fleet install agent-config` does.
	NoDeployment bool
}

func (o *Options) namespace() string {
	if o.Namespace == "" {
		return fleet.DefaultSystemNamespace
	}
	return o.Namespace
}

// Objects renders the objects of an installation, in the order they should be
// applied (namespace first, Deployment last).
func Objects(o Options) ([]client.Object, error) {
	ns := o.namespace()
	labels := map[string]string{ManagedByLabel: "fleet", "app": fleet.AgentName}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}
	}
	objs := []client.Object{&corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: labels},
	}}
	scheduling, err := SchedulingObjects(o)
	if err != nil {
		return nil, err
	}
	if o.Config != nil {
		if err := o.Config.Validate(); err != nil {
			return nil, err
		}
		data, err := yaml.Marshal(o.Config)
		if err != nil {
			return nil, err
		}
		objs = append(objs, &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: meta(fleet.AgentName),
			Data:       map[string]string{ConfigKey: string(data)},
		})
	}
	if o.Bootstrap != nil {
		if err := o.Bootstrap.Validate(); err != nil {
			return nil, err
		}
		b := o.Bootstrap
		objs = append(objs, &corev1.Secret{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: meta(fleet.AgentBootstrapSecretName),
			Type:       corev1.SecretTypeOpaque,
			Data: map[string][]byte{
				BootstrapAPIServerURLKey:                []byte(b.APIServerURL),
				BootstrapAPIServerCAKey:                 []byte(b.APIServerCA),
				BootstrapTokenKey:                       []byte(b.Token),
				BootstrapClusterNamespaceKey:            []byte(b.ClusterNamespace),
				BootstrapSystemRegistrationNamespaceKey: []byte(b.SystemRegistrationNamespace),
				BootstrapTokenNameKey:                   []byte(b.TokenName),
			},
		})
	}
	for _, src := range o.PullSecrets {
		objs = append(objs, &corev1.Secret{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: meta(src.Name),
			Type:       src.Type,
			Data:       src.Data,
		})
	}
	if o.NoDeployment {
		return objs, nil
	}
	// The agent deploys whatever its bundles hold, cluster-scoped objects
	// included, so downstream it needs cluster-admin; upstream it has almost
	// nothing (see the registration controller).
	objs = append(objs,
		&corev1.ServiceAccount{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta: meta(fleet.AgentName),
		},
		&rbacv1.ClusterRoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: fleet.AgentName + "-" + ns, Labels: labels},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: fleet.AgentName, Namespace: ns}},
		},
	)
	// The PriorityClass before the Deployment: a pod naming a missing one
	// is refused.
	objs = append(objs, scheduling...)
	objs = append(objs, deployment(o, meta(fleet.AgentName)))
	return objs, nil
}

// SchedulingObjects renders the agent's PriorityClass and
// PodDisruptionBudget, those o.Scheduling asks for.
func SchedulingObjects(o Options) ([]client.Object, error) {
	sc := o.Scheduling
	if sc == nil || o.NoDeployment {
		return nil, nil
	}
	labels := map[string]string{ManagedByLabel: "fleet", "app": fleet.AgentName}
	var objs []client.Object
	if sc.PriorityClass != nil {
		objs = append(objs, priorityClass(sc.PriorityClass, labels))
	}
	if sc.PodDisruptionBudget != nil {
		pdb, err := podDisruptionBudget(sc.PodDisruptionBudget, metav1.ObjectMeta{Namespace: o.namespace(), Labels: labels})
		if err != nil {
			return nil, err
		}
		objs = append(objs, pdb)
	}
	return objs, nil
}

func deployment(o Options, meta metav1.ObjectMeta) *appsv1.Deployment {
	image := o.Image
	if image == "" {
		image = DefaultImage
	}
	if o.PrivateRepoURL != "" {
		image = WithRegistry(image, o.PrivateRepoURL)
	}
	env := append([]corev1.EnvVar{{
		Name:      "NAMESPACE",
		ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}},
	}}, o.EnvVars...)
	resources := DefaultResources()
	if o.Resources != nil {
		resources = *o.Resources
	}
	if limit := GoMemLimit(resources); limit != "" && !hasEnv(env, "GOMEMLIMIT") {
		env = append(env, corev1.EnvVar{Name: "GOMEMLIMIT", Value: limit})
	}
	selector := map[string]string{"app": fleet.AgentName}
	var pullSecrets []corev1.LocalObjectReference
	for _, name := range o.ImagePullSecrets {
		pullSecrets = append(pullSecrets, corev1.LocalObjectReference{Name: name})
	}
	for _, s := range o.PullSecrets {
		if !slices.Contains(o.ImagePullSecrets, s.Name) {
			pullSecrets = append(pullSecrets, corev1.LocalObjectReference{Name: s.Name})
		}
	}
	var priorityClassName string
	if o.Scheduling != nil && o.Scheduling.PriorityClass != nil {
		priorityClassName = PriorityClassName
	}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: meta,
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			// A new pod before the old one goes: an agent upgrade whose new
			// version cannot start leaves the old agent running (and able
			// to deploy the fix), and the two never deploy at once, since
			// the new one waits for the leader lease the old one holds.
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromInt32(1)),
				}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: selector},
				Spec: corev1.PodSpec{
					ServiceAccountName: fleet.AgentName,
					ImagePullSecrets:   pullSecrets,
					PriorityClassName:  priorityClassName,
					HostNetwork:        o.HostNetwork,
					Tolerations:        o.Tolerations,
					Affinity:           o.Affinity,
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						RunAsUser:      ptr.To[int64](65532),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:            "agent",
						Image:           image,
						ImagePullPolicy: o.ImagePullPolicy,
						Args:            []string{"--namespace=$(NAMESPACE)", "--leader-elect"},
						Env:             env,
						Resources:       resources,
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr.To(false),
							ReadOnlyRootFilesystem:   ptr.To(true),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
						VolumeMounts: []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}},
					}},
					Volumes: []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
				},
			},
		},
	}
}

// PullSecrets are the names of the Secrets a Cluster's agent image is
// pulled with, and whether the install copies them from the manager's
// namespace: the Cluster's spec.agentPullSecrets when set (they exist
// downstream, nothing is copied), else the manager's defaults (copied).
func PullSecrets(spec *fleet.ClusterSpec, defaults []string) (names []string, copied bool) {
	if spec.AgentPullSecrets == nil {
		return defaults, true
	}
	names = make([]string, 0, len(*spec.AgentPullSecrets))
	for _, r := range *spec.AgentPullSecrets {
		if r.Name != "" {
			names = append(names, r.Name)
		}
	}
	return names, false
}

// ClusterOptions are the agent settings of a Cluster's spec: where the
// agent runs and how its Deployment is shaped. The caller adds the image and
// what else its installation needs.
func ClusterOptions(spec *fleet.ClusterSpec) Options {
	return Options{
		Namespace:      spec.AgentNamespace,
		PrivateRepoURL: spec.PrivateRepoURL,
		EnvVars:        spec.AgentEnvVars,
		Tolerations:    spec.AgentTolerations,
		Affinity:       spec.AgentAffinity,
		Resources:      spec.AgentResources,
		HostNetwork:    spec.HostNetwork != nil && *spec.HostNetwork,
		Scheduling:     spec.AgentSchedulingCustomization,
	}
}

// Deployment renders the agent Deployment alone, as Objects renders it.
func Deployment(o Options) *appsv1.Deployment {
	return deployment(o, metav1.ObjectMeta{Name: fleet.AgentName, Namespace: o.namespace(),
		Labels: map[string]string{ManagedByLabel: "fleet", "app": fleet.AgentName}})
}

// WithRegistry puts image under registry: "rancher/x:1" with "reg.local" gives
// "reg.local/rancher/x:1"; an image already naming a registry keeps its path.
func WithRegistry(image, registry string) string {
	path := image
	if i := strings.IndexByte(image, '/'); i > 0 {
		first := image[:i]
		if strings.ContainsAny(first, ".:") || first == "localhost" {
			path = image[i+1:]
		}
	}
	return strings.TrimSuffix(registry, "/") + "/" + path
}

// YAML renders objects as one multi-document stream.
func YAML(objs []client.Object) ([]byte, error) {
	var buf bytes.Buffer
	for _, obj := range objs {
		b, err := yaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		buf.WriteString("---\n")
		buf.Write(stripNoise(b))
	}
	return buf.Bytes(), nil
}

// stripNoise drops the empty creationTimestamp and status that typed objects
// marshal, so printed manifests read as a person would write them.
func stripNoise(b []byte) []byte {
	var m map[string]interface{}
	if yaml.Unmarshal(b, &m) != nil {
		return b
	}
	delete(m, "status")
	if md, ok := m["metadata"].(map[string]interface{}); ok {
		delete(md, "creationTimestamp")
	}
	if spec, ok := m["spec"].(map[string]interface{}); ok {
		if tpl, ok := spec["template"].(map[string]interface{}); ok {
			if md, ok := tpl["metadata"].(map[string]interface{}); ok {
				delete(md, "creationTimestamp")
			}
		}
	}
	out, err := yaml.Marshal(m)
	if err != nil {
		return b
	}
	return out
}
