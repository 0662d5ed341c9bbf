module github.com/flowdedup/flowdedup

go 1.26

require (
	github.com/gopacket/gopacket v1.7.7
	github.com/klauspost/cpuid/v2 v2.2.10
	github.com/tylertreat/BoomFilters v0.0.0-20251001182300-5b3723cc64ae
	github.com/zeebo/xxh3 v1.1.0
)

require (
	github.com/d4l3k/messagediff v1.2.1 // indirect
	golang.org/x/sys v0.45.0 // indirect
)
