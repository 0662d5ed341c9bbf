#include "textflag.h"

// func prefetch(lines []unsafe.Pointer)
TEXT ·prefetch(SB), NOSPLIT, $0-24
	MOVQ lines_base+0(FP), SI
	MOVQ lines_len+8(FP), CX
	TESTQ CX, CX
	JLE done
loop:
	MOVQ (SI), AX
	PREFETCHT0 (AX)
	ADDQ $8, SI
	DECQ CX
	JNZ loop
done:
	RET
