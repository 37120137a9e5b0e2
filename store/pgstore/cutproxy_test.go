package pgstore_test

import (
	"bytes"
	"net"
	"net/url"
	"sync"
	"testing"
)

// cutProxy forwards TCP connections to a PostgreSQL server and can cut
// the client side of the connections whose startup names an application:
// the client sees its connection closed, while the server keeps the
// session (and its advisory locks), as when a network drops a connection
// without the server noticing. It can also hold the server's answer to
// one statement (holdAnswerTo), as a slow network would.
type cutProxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu      sync.Mutex
	pairs   []*proxyPair
	closed  bool
	trigger []byte        // holdAnswerTo's statement text, until seen
	gate    chan struct{} // closed at release
}

// proxyPair is one forwarded connection.
type proxyPair struct {
	client, server net.Conn
	startup        []byte // the client's first bytes: its startup message
	cut            bool
	armed          bool          // the client sent the held statement's text
	held           chan struct{} // what the server sends waits for it to close
}

// newCutProxy starts a proxy to dsn's server and returns it with dsn
// pointing at it. It stops when the test ends, after every cleanup
// registered later (the Stores using it close first).
func newCutProxy(t *testing.T, dsn string) (*cutProxy, string) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: u.Host}
	u.Host = ln.Addr().String()
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p, u.String()
}

func (p *cutProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		pair := &proxyPair{client: c, server: s}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		p.pairs = append(p.pairs, pair)
		p.wg.Go(func() { p.forward(pair) })
		p.mu.Unlock()
	}
}

// forward copies both ways until either side closes. A cut pair's server
// side stays open.
func (p *cutProxy) forward(pair *proxyPair) {
	var wg sync.WaitGroup
	wg.Go(func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := pair.server.Read(buf)
			if n > 0 {
				p.mu.Lock()
				held := pair.held
				p.mu.Unlock()
				if held != nil {
					<-held
				}
				if _, werr := pair.client.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		p.end(pair)
	})
	buf := make([]byte, 32<<10)
	for {
		n, err := pair.client.Read(buf)
		if n > 0 {
			p.mu.Lock()
			if len(pair.startup) < 1024 {
				pair.startup = append(pair.startup, buf[:min(n, 1024)]...)
			}
			switch {
			case p.trigger == nil:
			case pair.armed: // the statement's execution, after its prepare
				pair.held, p.trigger = p.gate, nil
			case bytes.Contains(buf[:n], p.trigger):
				pair.armed = true
			}
			p.mu.Unlock()
			if _, werr := pair.server.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	p.end(pair)
	wg.Wait()
}

// end closes a pair's client side, and its server side unless it was cut.
func (p *cutProxy) end(pair *proxyPair) {
	p.mu.Lock()
	cut := pair.cut
	p.mu.Unlock()
	pair.client.Close()
	if !cut {
		pair.server.Close()
	}
}

// cut closes the client side of every connection whose startup message
// holds app, and reports how many it cut. Their server sessions live on
// until the server ends them or the proxy stops.
func (p *cutProxy) cut(app string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, pair := range p.pairs {
		if !pair.cut && bytes.Contains(pair.startup, []byte(app)) {
			pair.cut = true
			pair.client.Close()
			n++
		}
	}
	return n
}

// holdAnswerTo holds what the server sends on the connection that next
// prepares a statement holding text, from the client's next message (the
// statement's execution) until release is called: the server runs and
// commits the statement, and its client does not hear so.
func (p *cutProxy) holdAnswerTo(text string) (release func()) {
	gate := make(chan struct{})
	p.mu.Lock()
	p.trigger, p.gate = []byte(text), gate
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.gate == gate { // not released yet, nor by close
			p.gate = nil
			close(gate)
		}
	}
}

// close stops accepting, closes every connection and waits for the
// forwarding goroutines.
func (p *cutProxy) close() {
	p.mu.Lock()
	p.closed = true
	if p.gate != nil {
		close(p.gate)
		p.gate = nil
	}
	for _, pair := range p.pairs {
		pair.client.Close()
		pair.server.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}
