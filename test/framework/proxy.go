// Copyright The caliban-operator Authors.
// SPDX-License-Identifier: Apache-2.0

package framework

import (
	"errors"
	"io"
	"net"
	"sync"
)

// Proxy forwards TCP connections from a loopback port to a target address,
// bytes as they are (TLS passes through), and can cut them: what a client
// sees when the network between it and the apiserver fails. A client that
// reaches the apiserver through it sees its watches end without the
// apiserver ending them.
type Proxy struct {
	ln     net.Listener
	target string

	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	refusing bool
	closed   bool
	wg       sync.WaitGroup
}

// StartProxy listens on a free loopback port and forwards to target.
func StartProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is the address clients connect to.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every connection open through the proxy, and until Restore
// refuses new ones (closes them at once) if refuse is set. It returns how
// many connections it cut.
func (p *Proxy) Cut(refuse bool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refusing = refuse
	n := 0
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
		n++
	}
	return n / 2 // each forwarded connection is two
}

// Restore lets connections through again after Cut(true).
func (p *Proxy) Restore() {
	p.mu.Lock()
	p.refusing = false
	p.mu.Unlock()
}

// Close stops the proxy and cuts every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	_ = p.ln.Close()
	p.Cut(true)
	p.wg.Wait()
}

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		p.mu.Lock()
		refusing := p.refusing || p.closed
		p.mu.Unlock()
		if refusing {
			_ = client.Close()
			continue
		}
		p.wg.Go(func() { p.forward(client) })
	}
}

func (p *Proxy) forward(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = client.Close()
		return
	}
	p.mu.Lock()
	if p.refusing || p.closed {
		p.mu.Unlock()
		_ = client.Close()
		_ = server.Close()
		return
	}
	p.conns[client], p.conns[server] = struct{}{}, struct{}{}
	p.mu.Unlock()

	var done sync.WaitGroup
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		// One direction ended: end the other, as a broken link would.
		_ = dst.Close()
		_ = src.Close()
	}
	done.Go(func() { pipe(server, client) })
	done.Go(func() { pipe(client, server) })
	done.Wait()
	p.mu.Lock()
	delete(p.conns, client)
	delete(p.conns, server)
	p.mu.Unlock()
}
