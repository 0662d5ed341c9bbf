//go:build !linux

package hugepage

func advise[T any](s []T) {}
