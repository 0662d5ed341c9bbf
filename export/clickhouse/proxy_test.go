package clickhouse_test

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
)

// proxyMode says what faultProxy does with one request.
type proxyMode int

const (
	// pass forwards the request and the answer.
	pass proxyMode = iota
	// dropAnswer forwards the request, waits for the server's whole
	// answer, and does not give it to the client: the client times out
	// although the server did the work.
	dropAnswer
	// holdBody forwards the request line, headers and the first half of
	// the body, then holds the rest until release is closed: the server
	// has begun the request, and finishes it after the client gave up.
	holdBody
)

// faultProxy is an HTTP proxy between a Destination and a real ClickHouse
// that applies a mode to each request, in the order they come: the real
// server does the work, and only what the client sees of it changes.
type faultProxy struct {
	Addr     string
	upstream string
	ln       net.Listener

	mu      sync.Mutex
	modes   []proxyMode // modes of the next requests; pass when empty
	release chan struct{}
	wg      sync.WaitGroup
}

func startProxy(t *testing.T, upstream string) *faultProxy {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{Addr: ln.Addr().String(), upstream: upstream, ln: ln, release: make(chan struct{})}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(func() {
		ln.Close()
		p.releaseHeld()
		p.wg.Wait()
	})
	return p
}

// next sets the modes of the next requests.
func (p *faultProxy) next(modes ...proxyMode) {
	p.mu.Lock()
	p.modes = append(p.modes, modes...)
	p.mu.Unlock()
}

func (p *faultProxy) take() proxyMode {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.modes) == 0 {
		return pass
	}
	m := p.modes[0]
	p.modes = p.modes[1:]
	return m
}

// releaseHeld lets held bodies go on.
func (p *faultProxy) releaseHeld() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.release:
	default:
		close(p.release)
	}
}

func (p *faultProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer c.Close()
			p.conn(c)
		}()
	}
}

// conn serves the requests of one client connection.
func (p *faultProxy) conn(c net.Conn) {
	r := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(r)
		if err != nil {
			return
		}
		mode := p.take()
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.upstream)
		if err != nil {
			return
		}
		resp, ok := p.forward(up, req, body, mode)
		if !ok {
			up.Close()
			return
		}
		if mode == dropAnswer {
			// Keep the client's connection open and silent until the
			// client gives up and closes it.
			up.Close()
			io.Copy(io.Discard, r)
			return
		}
		if mode == holdBody {
			up.Close()
			return // the client gave up long ago
		}
		resp.Header.Set("Connection", "keep-alive")
		err = resp.Write(c)
		up.Close()
		if err != nil {
			return
		}
	}
}

// forward sends req with body to the server on up, as mode says, and reads
// the whole answer.
func (p *faultProxy) forward(up net.Conn, req *http.Request, body []byte, mode proxyMode) (*http.Response, bool) {
	out := &http.Request{
		Method:        req.Method,
		URL:           req.URL,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        req.Header.Clone(),
		Host:          req.Host,
		ContentLength: int64(len(body)),
		Close:         true,
	}
	out.Header.Del("Connection")
	out.Body = io.NopCloser(bytes.NewReader(body))
	var wire bytes.Buffer
	if err := out.Write(&wire); err != nil {
		return nil, false
	}
	first := wire.Bytes()
	var rest []byte
	if mode == holdBody {
		cut := wire.Len() - len(body)/2
		first, rest = first[:cut], first[cut:]
	}
	if _, err := up.Write(first); err != nil {
		return nil, false
	}
	if rest != nil {
		<-p.release
		if _, err := up.Write(rest); err != nil {
			return nil, false
		}
	}
	resp, err := http.ReadResponse(bufio.NewReader(up), out)
	if err != nil {
		return nil, false
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, false
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	resp.ContentLength = int64(len(b))
	resp.TransferEncoding = nil
	return resp, true
}
