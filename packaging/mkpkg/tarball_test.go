package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// The archive depends on the files' names, contents and executable bits
// alone: two trees written in a different order, at different times, with
// different permissions give the same bytes, with entries in name order,
// owned by root, dated -date, mode 0755 or 0644.
func TestTarIsReproducible(t *testing.T) {
	files := []struct {
		name string
		exec bool
	}{{"b/z", false}, {"a", true}, {"b/c/d", false}, {"b/a", false}}
	build := func(order []int, perm, execPerm os.FileMode, mtime time.Time) string {
		dir := t.TempDir()
		for _, i := range order {
			f := files[i]
			p := filepath.Join(dir, f.name)
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				t.Fatal(err)
			}
			mode := perm
			if f.exec {
				mode = execPerm
			}
			if err := os.WriteFile(p, []byte("content of "+f.name), mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, mode); err != nil { // past the umask
				t.Fatal(err)
			}
			if err := os.Chtimes(p, mtime, mtime); err != nil {
				t.Fatal(err)
			}
		}
		out := filepath.Join(t.TempDir(), "a.tar.gz")
		if err := tarMain([]string{"-date", "1700000000", "-prefix", "p", "-out", out, dir}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	a := build([]int{0, 1, 2, 3}, 0o644, 0o755, time.Unix(1, 0))
	b := build([]int{3, 2, 1, 0}, 0o600, 0o700, time.Now())
	ab, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if !bytes.Equal(ab, bb) {
		t.Fatalf("two archives of the same files differ (%d and %d bytes)", len(ab), len(bb))
	}
	zr, err := gzip.NewReader(bytes.NewReader(ab))
	if err != nil {
		t.Fatal(err)
	}
	if zr.Name != "" || !zr.ModTime.IsZero() {
		t.Errorf("gzip header: name %q, time %v", zr.Name, zr.ModTime)
	}
	tr := tar.NewReader(zr)
	var got []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, h.Name)
		want := int64(0o644)
		if h.Typeflag == tar.TypeDir || h.Name == "p/a" {
			want = 0o755
		}
		if h.Mode != want || h.Uid != 0 || h.Gid != 0 || h.Uname != "root" || h.ModTime.Unix() != 1700000000 {
			t.Errorf("%s: mode %o, owner %d:%d %s, time %v", h.Name, h.Mode, h.Uid, h.Gid, h.Uname, h.ModTime)
		}
	}
	if want := []string{"p/", "p/a", "p/b/", "p/b/a", "p/b/c/", "p/b/c/d", "p/b/z"}; !slices.Equal(got, want) {
		t.Errorf("entries %q, want %q", got, want)
	}
}

// Man pages and changelogs are gzipped at the highest level, as lintian
// checks (the header's XFL byte is 2), with no name or time.
func TestWriteGzip(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.gz")
	if err := writeGzip(p, []byte("page")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if b[8] != 2 || zr.Name != "" || !zr.ModTime.IsZero() {
		t.Errorf("gzip header: XFL %d, name %q, time %v", b[8], zr.Name, zr.ModTime)
	}
}
