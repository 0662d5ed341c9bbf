package clickhouse

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/gzip"
)

// client sends statements to the server's HTTP interface. Every request
// carries the same session_id, so that the server handles this client's
// requests one at a time: one that comes while an earlier one is still in
// the server's hands fails with SESSION_IS_LOCKED (see Destination.Records
// for why that matters).
type client struct {
	base      string // http://HOST:PORT/?session_id=...
	user      string
	password  string
	timeout   time.Duration
	http      *http.Client
	transport *http.Transport

	// answer holds the last answer's body; reused.
	answer bytes.Buffer
	// gz compresses insert bodies into zbuf when Config.Compression is
	// gzip; nil otherwise. Both are reused.
	gz   *gzip.Writer
	zbuf bytes.Buffer
	// lastChunk is the buffer of the last stream (insertStream).
	lastChunk []byte
	// requests and failures count requests and those that got no success,
	// insertBytes the bytes of insert bodies sent.
	requests, failures, insertBytes uint64
}

// maxErrorBody bounds how much of an error answer is read.
const maxErrorBody = 64 << 10

func newClient(cfg *Config) *client {
	var id [16]byte
	rand.Read(id[:]) // never fails
	q := url.Values{"session_id": {"flowdedup-" + hex.EncodeToString(id[:])}}
	t := &http.Transport{
		// No proxy from the environment: the URL names the server.
		Proxy:       nil,
		DialContext: (&net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}).DialContext,
		// One request at a time: one connection, kept between requests
		// for less than the servers' keep_alive_timeout (3 s by default
		// in 18.16's configuration), so that the server rarely closes a
		// connection the client is about to use; when it does, the
		// transport sends again on a new one (the request has GetBody).
		MaxIdleConns:        1,
		MaxIdleConnsPerHost: 1,
		IdleConnTimeout:     2 * time.Second,
		DisableCompression:  true,
	}
	var gz *gzip.Writer
	if cfg.Compression == CompressionGzip {
		gz, _ = gzip.NewWriterLevel(nil, gzip.BestSpeed) // the level is valid
	}
	return &client{
		gz:       gz,
		base:     "http://" + cfg.Address + "/?" + q.Encode(),
		user:     cfg.User,
		password: cfg.Password,
		timeout:  cfg.Timeout,
		http: &http.Client{
			Transport: t,
			// A redirect is not followed: the answer is an error.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		transport: t,
	}
}

// exec sends the statement sql (DDL or a SELECT) in the request body and
// returns the answer's body, valid until the next request. wait_end_of_query
// makes the server answer only when the statement is done, so that a
// failure in the middle of a result is an error status and not a 200 with
// the error text appended to part of the result.
func (c *client) exec(sql string, limit int64) ([]byte, error) {
	answer, _, err := c.post("&wait_end_of_query=1", bytesBody([]byte(sql)), "", limit)
	return answer, err
}

// insertStream sends the INSERT statement sql in the URL and the rows
// that open's readers make in the body, chunked (its length is not known
// before the rows are encoded). Each reader is stopped before
// insertStream returns: none reads its rows' source after that.
// kept says whether the transport was done with every reader: then the
// first one's buffer is in c.lastChunk, for the next stream.
func (c *client) insertStream(sql string, open func() stoppableReader) (kept bool, err error) {
	var (
		mu   sync.Mutex // GetBody may run on the transport's goroutines
		made []stoppableReader
	)
	_, kept, err = c.post("&query="+url.QueryEscape(sql), body{length: -1, open: func() io.Reader {
		r := open()
		mu.Lock()
		made = append(made, r)
		mu.Unlock()
		return r
	}}, "", maxErrorBody)
	mu.Lock()
	defer mu.Unlock()
	c.lastChunk = nil
	for i, r := range made {
		n, chunk := r.stop()
		c.insertBytes += uint64(n)
		if i == 0 && kept {
			c.lastChunk = chunk
		}
	}
	return kept, err
}

// stoppableReader is a request body that stop makes fail from then on; it
// returns the bytes given and its buffer.
type stoppableReader interface {
	io.Reader
	stop() (int64, []byte)
}

// body is what post sends: open makes a reader of it (again when the
// transport sends it again on a new connection), length is its length, or
// -1 for unknown (sent chunked).
type body struct {
	length int64
	open   func() io.Reader
}

func bytesBody(b []byte) body {
	return body{length: int64(len(b)), open: func() io.Reader { return bytes.NewReader(b) }}
}

// insert sends the INSERT statement sql in the URL and data, the rows, in
// the body. When kept is false the transport may still read data: the
// caller must not reuse it.
func (c *client) insert(sql string, data []byte) (kept bool, err error) {
	if c.gz == nil {
		c.insertBytes += uint64(len(data))
		_, kept, err = c.post("&query="+url.QueryEscape(sql), bytesBody(data), "", maxErrorBody)
		return kept, err
	}
	c.zbuf.Reset()
	c.gz.Reset(&c.zbuf)
	c.gz.Write(data) // a bytes.Buffer does not fail
	c.gz.Close()
	c.insertBytes += uint64(c.zbuf.Len())
	_, kept, err = c.post("&query="+url.QueryEscape(sql), bytesBody(c.zbuf.Bytes()), CompressionGzip, maxErrorBody)
	if !kept { // the transport still reads the compressed body: give it up
		c.zbuf = bytes.Buffer{}
	}
	return true, err // data itself was not sent: the caller may reuse it
}

// post sends body to the server with the URL parameters params, and the
// Content-Encoding encoding unless it is "", and reads up to limit bytes of
// a successful answer.
//
// The transport may still be sending body when the answer is in (one that
// came before the whole body was sent), so post waits for the transport to
// close it. When it does not within a second, post returns kept false, and
// the caller gives the buffer up rather than write into it.
func (c *client) post(params string, b body, encoding string, limit int64) (answer []byte, kept bool, err error) {
	c.requests++
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	g := &bodyGuard{}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+params, g.open(b.open()))
	if err != nil {
		c.failures++
		return nil, true, err
	}
	req.ContentLength = b.length
	req.GetBody = func() (io.ReadCloser, error) { return g.open(b.open()), nil }
	req.Header.Set("Content-Type", "application/octet-stream")
	if encoding != "" {
		req.Header.Set("Content-Encoding", encoding)
	}
	if c.user != "" {
		req.SetBasicAuth(c.user, c.password)
	}
	c.answer.Reset()
	answer, err = c.roundTrip(req, limit)
	if err != nil {
		c.failures++
	}
	return answer, g.wait(), err
}

func (c *client) roundTrip(req *http.Request, limit int64) ([]byte, error) {
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		c.answer.ReadFrom(io.LimitReader(resp.Body, maxErrorBody)) // what came before an error is enough
		return nil, parseServerError(resp.StatusCode, resp.Header, c.answer.Bytes())
	}
	n, err := c.answer.ReadFrom(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if n > limit {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrBadAnswer, limit)
	}
	return c.answer.Bytes(), nil
}

func (c *client) close() { c.transport.CloseIdleConnections() }

// bodyGuard counts the request bodies the transport has not closed yet.
type bodyGuard struct {
	pending atomic.Int32
	mu      sync.Mutex
	done    chan struct{} // closed when pending drops to 0 while waited for
}

func (g *bodyGuard) open(r io.Reader) io.ReadCloser {
	g.pending.Add(1)
	return &guardedBody{Reader: r, g: g}
}

func (g *bodyGuard) closed() {
	if g.pending.Add(-1) == 0 {
		g.mu.Lock()
		if g.done != nil {
			close(g.done)
			g.done = nil
		}
		g.mu.Unlock()
	}
}

// wait waits up to a second for every body to be closed, and reports
// whether they were.
func (g *bodyGuard) wait() bool {
	g.mu.Lock()
	if g.pending.Load() == 0 {
		g.mu.Unlock()
		return true
	}
	done := make(chan struct{})
	g.done = done
	g.mu.Unlock()
	select {
	case <-done:
		return true
	case <-time.After(time.Second):
		return false
	}
}

type guardedBody struct {
	io.Reader
	g    *bodyGuard
	once sync.Once
}

func (b *guardedBody) Close() error {
	b.once.Do(b.g.closed)
	return nil
}

// sentNothing reports whether err says that the request never reached the
// server: connecting failed. Anything else may have been received and
// acted on, although no answer says so.
func sentNothing(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}
