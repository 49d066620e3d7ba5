// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// The operator's identity as manifests/base installs it.
const (
	OperatorNamespace      = "caliban-system"
	OperatorServiceAccount = "caliban-operator"
)

// Kustomize renders the kustomization in dir (relative to the repository
// root) as `kubectl apply -k` would, in kubectl's order: namespaces and
// CRDs first.
func Kustomize(root, dir string) ([]*unstructured.Unstructured, error) {
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionLegacy
	resMap, err := krusty.MakeKustomizer(opts).Run(filesys.MakeFsOnDisk(), filepath.Join(root, dir))
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", dir, err)
	}
	var objs []*unstructured.Unstructured
	for _, r := range resMap.Resources() {
		// Through JSON: kustomize's maps hold int, unstructured wants int64.
		data, err := r.MarshalJSON()
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			return nil, err
		}
		objs = append(objs, u)
	}
	return objs, nil
}

// OperatorKubeconfig mints a token valid for ttl for the operator's
// ServiceAccount (TokenRequest) and writes, into dir, a kubeconfig that
// authenticates with it alone: the apiserver then authorizes and attributes
// the operator's requests as it would in its pod.
func (c *Cluster) OperatorKubeconfig(ctx context.Context, dir string, ttl time.Duration) (string, error) {
	seconds := int64(ttl.Seconds())
	tr, err := c.Kube.CoreV1().ServiceAccounts(OperatorNamespace).CreateToken(ctx, OperatorServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}},
		metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token for %s/%s: %w", OperatorNamespace, OperatorServiceAccount, err)
	}
	ca := c.Config.CAData
	if len(ca) == 0 && c.Config.CAFile != "" {
		if ca, err = os.ReadFile(c.Config.CAFile); err != nil {
			return "", err
		}
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: c.Config.Host, CertificateAuthorityData: ca, InsecureSkipTLSVerify: len(ca) == 0}
	kc.AuthInfos["operator"] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["operator"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "operator"}
	kc.CurrentContext = "operator"
	path := filepath.Join(dir, "operator.kubeconfig")
	return path, clientcmd.WriteToFile(*kc, path)
}

// KubeconfigVia writes, next to kubeconfig, a copy whose clusters are
// reached at host:port addr instead (a Proxy's), and returns its path. TLS
// still checks the apiserver's certificate, which names the loopback IP.
func KubeconfigVia(kubeconfig, addr string) (string, error) {
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		return "", err
	}
	for _, cl := range cfg.Clusters {
		cl.Server = "https://" + addr
	}
	path := kubeconfig + ".via-" + strings.ReplaceAll(addr, ":", "-")
	return path, clientcmd.WriteToFile(*cfg, path)
}

// InstallOperatorIdentity applies manifests/base as `kubectl apply -k`
// would, but for its Deployment: the operator's namespace, ServiceAccount
// and RBAC. A test then runs the binary as a process under that
// ServiceAccount (OperatorKubeconfig), authorized as in its pod.
func (c *Cluster) InstallOperatorIdentity(ctx context.Context) error {
	objs, err := Kustomize(c.Root, filepath.Join("manifests", "base"))
	if err != nil {
		return err
	}
	var identity []*unstructured.Unstructured
	for _, u := range objs {
		if u.GetKind() != "Deployment" {
			identity = append(identity, u)
		}
	}
	if err := c.Apply(ctx, "", identity...); err != nil {
		return fmt.Errorf("installing the operator's identity from manifests/base: %w", err)
	}
	return nil
}
