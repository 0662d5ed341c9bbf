//go:build !race

package ipfix_test

const raceEnabled = false
