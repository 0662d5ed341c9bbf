package pcapfilter

// The lexer: an expression's words, numbers, operators and parentheses,
// each with its byte offset for error messages.

import (
	"fmt"
	"strconv"
	"strings"
)

type tokKind uint8

const (
	tokWord tokKind = iota
	tokLParen
	tokRParen
	tokNot
	tokAnd
	tokOr
	tokEnd
)

type token struct {
	kind tokKind
	text string
	pos  int
}

func (t token) String() string {
	if t.kind == tokEnd {
		return "end of filter"
	}
	return strconv.Quote(t.text)
}

func wordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '.' || c == ':' || c == '/' || c == '-' || c == '_' || c == '\\'
}

func lex(expr string) ([]token, error) {
	var toks []token
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '(':
			toks = append(toks, token{tokLParen, "(", i})
			i++
		case c == ')':
			toks = append(toks, token{tokRParen, ")", i})
			i++
		case c == '!' && !strings.HasPrefix(expr[i:], "!="):
			toks = append(toks, token{tokNot, "!", i})
			i++
		case strings.HasPrefix(expr[i:], "&&"):
			toks = append(toks, token{tokAnd, "&&", i})
			i += 2
		case strings.HasPrefix(expr[i:], "||"):
			toks = append(toks, token{tokOr, "||", i})
			i += 2
		case wordByte(c):
			j := i
			for j < len(expr) && wordByte(expr[j]) {
				j++
			}
			w := expr[i:j]
			kind := tokWord
			switch w {
			case "and":
				kind = tokAnd
			case "or":
				kind = tokOr
			case "not":
				kind = tokNot
			}
			toks = append(toks, token{kind, w, i})
			i = j
		case c == '[':
			return nil, &Error{expr, i, "packet data accessors such as tcp[13] are not supported"}
		case strings.IndexByte("=<>&|+-*%^~", c) >= 0 || c == '!':
			return nil, &Error{expr, i, fmt.Sprintf("arithmetic and comparisons (%q) are not supported", c)}
		default:
			return nil, &Error{expr, i, fmt.Sprintf("unexpected character %q", c)}
		}
	}
	return append(toks, token{kind: tokEnd, pos: len(expr)}), nil
}
