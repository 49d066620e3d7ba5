// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package builders

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"

	calibanv1alpha1 "github.com/caliban-ai/caliban-operator/pkg/apis/caliban/v1alpha1"
)

// These tests run CloneScript's output for private sources with a real git
// (and, for ssh, OpenSSH's client) against servers that demand
// credentials, with the Secret's files laid out as the pod mounts them:
// credentialsDir/<index of the source>/<key>, mode 0400.

const (
	testGitUser = "caliban-bot"
	// testGitPassword holds shell and printf syntax, which must reach the
	// server as written.
	testGitPassword = `s3cr3t 'q' "d" $HOME $(id) %s \n`
)

// writeCredentials writes a Secret's files into dir as its volume holds
// them: one file per key, mode 0400.
func writeCredentials(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for key, value := range files {
		if err := os.WriteFile(filepath.Join(dir, key), value, 0o400); err != nil {
			t.Fatal(err)
		}
	}
}

// basicAuthFiles are a basic-auth Secret's files; the username ends in a
// newline, as one written with `kubectl create secret --from-file` of an
// editor-saved file does.
func basicAuthFiles(password string) map[string][]byte {
	return map[string][]byte{
		corev1.BasicAuthUsernameKey: []byte(testGitUser + "\n"),
		corev1.BasicAuthPasswordKey: []byte(password),
	}
}

// requireBasicAuth answers 401, as git hosts do, to a request without
// testGitUser and testGitPassword, and passes the others to next.
func requireBasicAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != testGitUser || p != testGitPassword {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// trustServer writes srv's certificate to a PEM file and returns the
// variable that makes git trust it, and only it: GIT_SSL_CAINFO, never
// GIT_SSL_NO_VERIFY. (Every httptest TLS server has the same certificate,
// for 127.0.0.1, so this trusts all of a test's servers.)
func trustServer(t *testing.T, dir string, srv *httptest.Server) string {
	t.Helper()
	file := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	return "GIT_SSL_CAINFO=" + file
}

// withPublicFirst puts a public file:// source, with no credentials, at
// index 0, so that the private ones find their files under 1, 2, ...: the
// directory is the source's index in the whole list.
func (f *gitFixture) withPublicFirst(sources []calibanv1alpha1.Source, want map[string]string, root string) []calibanv1alpha1.Source {
	want["public"] = f.tagged
	return append([]calibanv1alpha1.Source{{Name: "public", Repo: "file://" + f.origin, Ref: "v1", Path: root + "/public"}}, sources...)
}

// checkPlainOrigin checks that a credentialed checkout kept nothing of its
// credentials: origin is the plain URL, and the repository's config names
// no helper, ssh command or secret, so nothing run later in the workspace
// can fetch or push with them.
func (f *gitFixture) checkPlainOrigin(t *testing.T, s calibanv1alpha1.Source, secrets ...string) {
	t.Helper()
	if got := f.git(t, "-C", s.Path, "config", "--get", "remote.origin.url"); got != s.Repo {
		t.Errorf("source %s: origin %q, want the plain %q", s.Name, got, s.Repo)
	}
	config, err := os.ReadFile(filepath.Join(s.Path, ".git", "config"))
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range append([]string{"credential", "helper", "sshCommand", "ssh -"}, secrets...) {
		if strings.Contains(string(config), bad) {
			t.Errorf("source %s: .git/config holds %q:\n%s", s.Name, bad, config)
		}
	}
}

// cloneFails runs the script for the one source s, with its files under
// credentialsDir/0, and checks that it fails with wantOutput in its output,
// without printing any of secrets, and leaves no .git at the path for the
// next start to take for a checkout.
func (f *gitFixture) cloneFails(t *testing.T, s calibanv1alpha1.Source, credentialsDir, wantOutput string, secrets []string, extraEnv ...string) string {
	t.Helper()
	out, err := f.sh(CloneScript([]calibanv1alpha1.Source{s}, credentialsDir), extraEnv...)
	if err == nil {
		t.Fatalf("source %s: the clone script succeeded, want a failure with %q:\n%s", s.Name, wantOutput, out)
	}
	if !strings.Contains(out, wantOutput) {
		t.Errorf("source %s: the script's output does not say %q:\n%s", s.Name, wantOutput, out)
	}
	for _, secret := range secrets {
		if strings.Contains(out, secret) {
			t.Errorf("source %s: the script's output shows the secret %q:\n%s", s.Name, secret, out)
		}
	}
	if _, err := os.Stat(filepath.Join(s.Path, ".git")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("source %s: after the failure %s/.git is there (%v), want it gone so the next start clones afresh", s.Name, s.Path, err)
	}
	return out
}

// TestCloneScriptAuthenticatesOverHTTPS clones a branch, a tag and a
// commit that is the tip of nothing over HTTPS from a server that demands
// basic auth, with the username and password read from the Secret's files,
// and a second run changes nothing.
func TestCloneScriptAuthenticatesOverHTTPS(t *testing.T) {
	f := newGitFixture(t)
	srv := httptest.NewTLSServer(requireBasicAuth(gitHTTPHandler(t, f.dir)))
	defer srv.Close()
	ca := trustServer(t, f.dir, srv)
	repo := srv.URL + "/origin"

	// The server is what this test takes it for: git trusts it only
	// through the CA file, and it refuses git without credentials.
	if out, err := f.sh("git ls-remote -- " + shellQuote(repo)); err == nil || !strings.Contains(out, "certificate") {
		t.Fatalf("without GIT_SSL_CAINFO git must refuse the test server's certificate; err %v:\n%s", err, out)
	}
	if out, err := f.sh("GIT_TERMINAL_PROMPT=0 git ls-remote -- "+shellQuote(repo), ca); err == nil {
		t.Fatalf("the test server let git in without credentials:\n%s", out)
	}

	root := filepath.Join(f.dir, "ws")
	creds := filepath.Join(f.dir, "creds")
	sources, want := f.sources(t, repo, root, &calibanv1alpha1.SourceCredentialsRef{SecretName: "git-https"})
	sources = f.withPublicFirst(sources, want, root)
	for i := 1; i < len(sources); i++ {
		writeCredentials(t, filepath.Join(creds, strconv.Itoa(i)), basicAuthFiles(testGitPassword))
	}
	f.cloneTwice(t, sources, want, creds, ca)
	for _, s := range sources[1:] {
		f.checkPlainOrigin(t, s, testGitPassword)
	}
}

// TestCloneScriptIgnoresTheImagesCredentialHelpers: a credential helper
// configured in the git image (here in the global config, answering every
// request with a wrong password) is reset, so the Secret's password is the
// one git sends. (Not git's store helper: it erases what a server refused,
// and would be gone after the check that it is in force.)
func TestCloneScriptIgnoresTheImagesCredentialHelpers(t *testing.T) {
	f := newGitFixture(t)
	srv := httptest.NewTLSServer(requireBasicAuth(gitHTTPHandler(t, f.dir)))
	defer srv.Close()
	ca := trustServer(t, f.dir, srv)
	global := filepath.Join(f.dir, "image-gitconfig")
	config := "[credential]\n\thelper = \"!f() { echo username=" + testGitUser + "; echo password=wrong; }; f\"\n"
	if err := os.WriteFile(global, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	image := "GIT_CONFIG_GLOBAL=" + global
	// The image's helper is in force: git alone uses it, and fails.
	if out, err := f.sh("GIT_TERMINAL_PROMPT=0 git ls-remote -- "+shellQuote(srv.URL+"/origin"), ca, image); err == nil || !strings.Contains(out, "Authentication failed for") {
		t.Fatalf("git with the image's helper must send its wrong password; err %v:\n%s", err, out)
	}

	root := filepath.Join(f.dir, "ws")
	creds := filepath.Join(f.dir, "creds")
	sources, want := f.sources(t, srv.URL+"/origin", root, &calibanv1alpha1.SourceCredentialsRef{SecretName: "git-https"})
	for i := range sources {
		writeCredentials(t, filepath.Join(creds, strconv.Itoa(i)), basicAuthFiles(testGitPassword))
	}
	f.cloneTwice(t, sources, want, creds, ca, image)
}

// TestCloneScriptFailsOverHTTPSWithAWrongPassword: git's own message, no
// prompt, the password not shown, and no .git left behind, for a clone
// and for a fetch by commit.
func TestCloneScriptFailsOverHTTPSWithAWrongPassword(t *testing.T) {
	f := newGitFixture(t)
	srv := httptest.NewTLSServer(requireBasicAuth(gitHTTPHandler(t, f.dir)))
	defer srv.Close()
	ca := trustServer(t, f.dir, srv)
	wrong := "not-" + testGitPassword

	sources, _ := f.sources(t, srv.URL+"/origin", filepath.Join(f.dir, "ws"), &calibanv1alpha1.SourceCredentialsRef{SecretName: "git-https"})
	for _, s := range sources {
		t.Run(s.Name, func(t *testing.T) {
			creds := filepath.Join(f.dir, "creds-"+s.Name)
			writeCredentials(t, filepath.Join(creds, "0"), basicAuthFiles(wrong))
			f.cloneFails(t, s, creds, "Authentication failed for", []string{wrong}, ca)
		})
	}
}

// TestCloneScriptGivesNoPasswordToARedirectedHost: the repo's server
// redirects git's first request to another server (another port of the
// same address: another host to git and to its credential helpers), which
// demands basic auth. The other server must never see the password, and
// the clone fails.
//
//   - "before authenticating": the repo's server redirects every request,
//     so git's first, which carries no credentials yet, is redirected; the
//     401 comes from the other server, git moves its credential request to
//     the new host and asks its helpers, and the script's helper, which
//     answers for the repo's own host only, must give nothing. This is the
//     case that tests the helper's host check.
//   - "after authenticating": the repo's server takes the password, then
//     redirects. curl does not carry the Authorization header to another
//     host, and git asks no helper again after a retry with credentials
//     (it fails with "Authentication failed"), so this case checks git and
//     curl in front of the helper rather than the helper itself.
//
// Both run git end to end, rather than `git credential fill` with the
// script's -c options: the property is what reaches the other server, and
// lifting the helper out of the script would tie the test to its spelling.
func TestCloneScriptGivesNoPasswordToARedirectedHost(t *testing.T) {
	f := newGitFixture(t)
	var (
		mu             sync.Mutex
		otherRequests  int
		authorizations []string
	)
	other := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		otherRequests++
		if a := r.Header.Get("Authorization"); a != "" {
			authorizations = append(authorizations, a)
		}
		mu.Unlock()
		w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
		http.Error(w, "authentication required", http.StatusUnauthorized)
	}))
	defer other.Close()
	var redirects atomic.Int32
	// The same path and query on the other server, as git requires of a
	// redirect of its first request.
	redirect := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		redirects.Add(1)
		http.Redirect(w, r, other.URL+r.URL.RequestURI(), http.StatusFound)
	})
	ca := trustServer(t, f.dir, other)

	for _, c := range []struct {
		name       string
		handler    http.Handler
		wantOutput string
	}{
		// git asked for the other host's username, and nothing gave one.
		{"before authenticating", redirect, "could not read Username for '" + other.URL + "'"},
		{"after authenticating", requireBasicAuth(redirect), "Authentication failed for"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewTLSServer(c.handler)
			defer srv.Close()
			root := filepath.Join(f.dir, "ws-"+strings.ReplaceAll(c.name, " ", "-"))
			sources, _ := f.sources(t, srv.URL+"/origin", root, &calibanv1alpha1.SourceCredentialsRef{SecretName: "git-https"})
			for _, s := range sources {
				redirects.Store(0)
				mu.Lock()
				otherRequests, authorizations = 0, nil
				mu.Unlock()

				creds := filepath.Join(root, "creds-"+s.Name)
				writeCredentials(t, filepath.Join(creds, "0"), basicAuthFiles(testGitPassword))
				out := f.cloneFails(t, s, creds, c.wantOutput, []string{testGitPassword}, ca)

				mu.Lock()
				// Without the first two the case proves nothing.
				if redirects.Load() == 0 {
					t.Errorf("source %s: the repo's server never redirected:\n%s", s.Name, out)
				}
				if otherRequests == 0 {
					t.Errorf("source %s: git never followed the redirect to the other server:\n%s", s.Name, out)
				}
				if len(authorizations) > 0 {
					t.Errorf("source %s: the other server was sent credentials %q after a redirect:\n%s", s.Name, authorizations, out)
				}
				mu.Unlock()
			}
		})
	}
}

// sshGitServer serves the repositories under root to git over SSH, as git
// hosts do: user git, one accepted public key, and a session's exec of
// `git-upload-pack '<path>'` (the only command it runs), with the
// GIT_PROTOCOL a client sends by env request.
type sshGitServer struct {
	port    int
	hostKey ssh.PublicKey
	root    string
	env     []string
	execs   atomic.Int32 // upload-packs started
}

func newSSHKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func sshPublicKey(t *testing.T, key ed25519.PrivateKey) ssh.PublicKey {
	t.Helper()
	pub, err := ssh.NewPublicKey(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// openSSHPrivateKey is key as ssh-keygen writes it, in OpenSSH's PEM
// format, the content of an ssh-auth Secret's ssh-privatekey.
func openSSHPrivateKey(t *testing.T, key ed25519.PrivateKey) []byte {
	t.Helper()
	block, err := ssh.MarshalPrivateKey(key, "")
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(block)
}

// startSSHGitServer listens on 127.0.0.1 with a host key of its own and
// accepts only clientKey; the test's cleanup closes the listener and every
// connection and waits for all of the server's goroutines.
func startSSHGitServer(t *testing.T, f *gitFixture, clientKey ssh.PublicKey) *sshGitServer {
	t.Helper()
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Fatalf("the ssh cases need OpenSSH's client on PATH, as git's ssh transport runs it: %v", err)
	}
	hostKey := newSSHKey(t)
	signer, err := ssh.NewSignerFromKey(hostKey)
	if err != nil {
		t.Fatal(err)
	}
	config := &ssh.ServerConfig{
		PublicKeyCallback: func(c ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if c.User() == "git" && bytes.Equal(key.Marshal(), clientKey.Marshal()) {
				return nil, nil
			}
			return nil, fmt.Errorf("key %s not accepted for %q", ssh.FingerprintSHA256(key), c.User())
		},
	}
	config.AddHostKey(signer)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &sshGitServer{port: ln.Addr().(*net.TCPAddr).Port, hostKey: signer.PublicKey(), root: f.dir, env: f.env}

	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		conns  = map[net.Conn]bool{}
		closed bool
	)
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		closed = true
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if closed {
				mu.Unlock()
				c.Close()
				return
			}
			conns[c] = true
			wg.Add(1)
			mu.Unlock()
			go func() {
				defer wg.Done()
				s.serveConn(c, config)
				mu.Lock()
				delete(conns, c)
				mu.Unlock()
			}()
		}
	}()
	return s
}

// knownHosts is a known_hosts line giving key for this server's address.
func (s *sshGitServer) knownHosts(key ssh.PublicKey) []byte {
	return fmt.Appendf(nil, "[127.0.0.1]:%d %s", s.port, ssh.MarshalAuthorizedKey(key))
}

func (s *sshGitServer) serveConn(c net.Conn, config *ssh.ServerConfig) {
	defer c.Close()
	conn, chans, reqs, err := ssh.NewServerConn(c, config)
	if err != nil {
		return // the client refused the host key, or the server its key
	}
	defer conn.Close()
	go ssh.DiscardRequests(reqs)
	var sessions sync.WaitGroup
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "only sessions")
			continue
		}
		ch, chReqs, err := nc.Accept()
		if err != nil {
			continue
		}
		sessions.Add(1)
		go func() {
			defer sessions.Done()
			s.serveSession(ch, chReqs)
		}()
	}
	sessions.Wait()
}

// serveSession takes env GIT_PROTOCOL and one exec of git-upload-pack, and
// refuses every other request; when the command ends it sends its exit
// status and closes the channel.
func (s *sshGitServer) serveSession(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer func() {
		ch.Close()
		go ssh.DiscardRequests(reqs) // until the channel's close comes back
	}()
	var protocol string
	exited := make(chan uint32, 1)
	started := false
	for {
		select {
		case req, ok := <-reqs:
			if !ok {
				return
			}
			switch req.Type {
			case "env":
				var kv struct{ Name, Value string }
				ok := ssh.Unmarshal(req.Payload, &kv) == nil && kv.Name == "GIT_PROTOCOL" && !started
				if ok {
					protocol = kv.Value
				}
				req.Reply(ok, nil)
			case "exec":
				var cmd struct{ Command string }
				repo, ok := "", false
				if ssh.Unmarshal(req.Payload, &cmd) == nil && !started {
					repo, ok = s.uploadPackRepo(cmd.Command)
				}
				req.Reply(ok, nil)
				if !ok {
					return
				}
				started = true
				s.execs.Add(1)
				go func() { exited <- s.uploadPack(ch, repo, protocol) }()
			default:
				if req.WantReply {
					req.Reply(false, nil)
				}
			}
		case status := <-exited:
			ch.CloseWrite()
			ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{status}))
			return
		}
	}
}

// uploadPackRepo reads the command git's ssh transport runs,
// git-upload-pack '<path>', and maps the path under the server's root;
// any other command is refused.
func (s *sshGitServer) uploadPackRepo(command string) (string, bool) {
	const prefix = "git-upload-pack '"
	if len(command) < len(prefix)+2 || !strings.HasPrefix(command, prefix) || !strings.HasSuffix(command, "'") {
		return "", false
	}
	p := command[len(prefix) : len(command)-1]
	if strings.Contains(p, "'") {
		return "", false
	}
	return filepath.Join(s.root, filepath.Clean("/"+p)), true
}

// uploadPack runs git-upload-pack on repo with the channel as its stdin,
// stdout and stderr, and returns its exit status.
func (s *sshGitServer) uploadPack(ch ssh.Channel, repo, protocol string) uint32 {
	cmd := exec.Command("git-upload-pack", repo)
	cmd.Env = s.env
	if protocol != "" {
		cmd.Env = append(append([]string(nil), s.env...), "GIT_PROTOCOL="+protocol)
	}
	cmd.Stdout = ch
	cmd.Stderr = ch.Stderr()
	stdin, err := cmd.StdinPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		fmt.Fprintln(ch.Stderr(), err)
		return 127
	}
	// Not cmd.Stdin = ch: Wait would then wait for the client's EOF. The
	// copy ends when the channel closes, or at the first write after
	// upload-pack exited (Wait closes the pipe).
	go func() {
		io.Copy(stdin, ch)
		stdin.Close()
	}()
	if err := cmd.Wait(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() > 0 {
			return uint32(exit.ExitCode())
		}
		return 1
	}
	return 0
}

// sshAuthFiles are an ssh-auth Secret's files.
func sshAuthFiles(t *testing.T, key ed25519.PrivateKey, knownHosts []byte) map[string][]byte {
	t.Helper()
	return map[string][]byte{corev1.SSHAuthPrivateKey: openSSHPrivateKey(t, key), SSHKnownHostsKey: knownHosts}
}

// TestCloneScriptAuthenticatesOverSSH clones a branch, a tag and a commit
// that is the tip of nothing over ssh:// with the Secret's private key,
// checking the server's host key against the Secret's known_hosts, and a
// second run changes nothing.
func TestCloneScriptAuthenticatesOverSSH(t *testing.T) {
	f := newGitFixture(t)
	clientKey := newSSHKey(t)
	srv := startSSHGitServer(t, f, sshPublicKey(t, clientKey))
	repo := fmt.Sprintf("ssh://git@127.0.0.1:%d/origin", srv.port)

	root := filepath.Join(f.dir, "ws")
	creds := filepath.Join(f.dir, "creds")
	sources, want := f.sources(t, repo, root, &calibanv1alpha1.SourceCredentialsRef{SecretName: "git-ssh"})
	sources = f.withPublicFirst(sources, want, root)
	for i := 1; i < len(sources); i++ {
		writeCredentials(t, filepath.Join(creds, strconv.Itoa(i)), sshAuthFiles(t, clientKey, srv.knownHosts(srv.hostKey)))
	}
	f.cloneTwice(t, sources, want, creds)
	if got := srv.execs.Load(); got != 3 {
		t.Errorf("the server ran %d upload-packs, want 3: one per private source, none on the second run", got)
	}
	for _, s := range sources[1:] {
		f.checkPlainOrigin(t, s)
	}
}

// TestCloneScriptRefusesAnUnknownSSHHostKey: a server whose host key is
// not the one the Secret's known_hosts gives for its address, or whose
// address has none there, is not talked to: ssh's own message, and no
// .git left behind.
func TestCloneScriptRefusesAnUnknownSSHHostKey(t *testing.T) {
	f := newGitFixture(t)
	clientKey := newSSHKey(t)
	srv := startSSHGitServer(t, f, sshPublicKey(t, clientKey))
	repo := fmt.Sprintf("ssh://git@127.0.0.1:%d/origin", srv.port)
	otherHost := fmt.Sprintf("[127.0.0.1]:%d %s", srv.port+1, ssh.MarshalAuthorizedKey(srv.hostKey))

	for name, knownHosts := range map[string][]byte{
		"another key":         srv.knownHosts(sshPublicKey(t, newSSHKey(t))),
		"no key for the host": []byte(otherHost), // its key, for another port
		"empty known_hosts":   nil,
	} {
		t.Run(name, func(t *testing.T) {
			execs := srv.execs.Load()
			sources, _ := f.sources(t, repo, filepath.Join(f.dir, "ws-"+strings.ReplaceAll(name, " ", "-")), &calibanv1alpha1.SourceCredentialsRef{SecretName: "git-ssh"})
			for _, s := range sources {
				creds := filepath.Join(f.dir, "creds-"+strings.ReplaceAll(name, " ", "-")+"-"+s.Name)
				writeCredentials(t, filepath.Join(creds, "0"), sshAuthFiles(t, clientKey, knownHosts))
				f.cloneFails(t, s, creds, "Host key verification failed", nil)
			}
			if got := srv.execs.Load() - execs; got != 0 {
				t.Errorf("the server ran %d commands for a client that must not have trusted it", got)
			}
		})
	}
}

// TestCloneScriptFailsOverSSHWithARefusedKey: a key the server does not
// accept fails with ssh's own message, and leaves no .git behind.
func TestCloneScriptFailsOverSSHWithARefusedKey(t *testing.T) {
	f := newGitFixture(t)
	srv := startSSHGitServer(t, f, sshPublicKey(t, newSSHKey(t)))
	repo := fmt.Sprintf("ssh://git@127.0.0.1:%d/origin", srv.port)
	sources, _ := f.sources(t, repo, filepath.Join(f.dir, "ws"), &calibanv1alpha1.SourceCredentialsRef{SecretName: "git-ssh"})
	for _, s := range sources {
		creds := filepath.Join(f.dir, "creds-"+s.Name)
		writeCredentials(t, filepath.Join(creds, "0"), sshAuthFiles(t, newSSHKey(t), srv.knownHosts(srv.hostKey)))
		f.cloneFails(t, s, creds, "Permission denied", nil)
	}
	if got := srv.execs.Load(); got != 0 {
		t.Errorf("the server ran %d commands for a key it does not accept", got)
	}
}
