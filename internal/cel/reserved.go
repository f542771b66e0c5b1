package cel

import "strings"

// CEL reserves the word `namespace`, yet the API binds a variable of that
// name in keepNamespace. Before parsing, the bare identifier is renamed to
// nsIdent, of the same length so that error positions stay true, and error
// messages name it back. Selections such as `object.metadata.namespace` and
// text inside strings are left alone.
const nsIdent = "ns_object"

func renameNamespace(src string) string {
	const word = VarNamespace
	if !strings.Contains(src, word) {
		return src
	}
	var b strings.Builder
	b.Grow(len(src))
	for i := 0; i < len(src); {
		switch c := src[i]; {
		case c == '\'' || c == '"' || c == '`':
			end := skipQuoted(src, i)
			b.WriteString(src[i:end])
			i = end
		case c == '/' && strings.HasPrefix(src[i:], "//"):
			end := strings.IndexByte(src[i:], '\n')
			if end < 0 {
				end = len(src) - i
			}
			b.WriteString(src[i : i+end])
			i += end
		case strings.HasPrefix(src[i:], word) && !isIdentByte(before(src, i)) && before(src, i) != '.' &&
			(i+len(word) == len(src) || !isIdentByte(src[i+len(word)])):
			b.WriteString(nsIdent)
			i += len(word)
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

// restoreNamespace names the variable back in an error message.
func restoreNamespace(msg string) string {
	return strings.ReplaceAll(msg, nsIdent, VarNamespace)
}

// before returns the last byte before i that is not white space, or 0.
func before(src string, i int) byte {
	for i--; i >= 0; i-- {
		if c := src[i]; c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return c
		}
	}
	return 0
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// skipQuoted returns the index just past the string literal or quoted
// identifier that starts at i; raw strings (r'...') take no escapes.
func skipQuoted(src string, i int) int {
	q := src[i]
	raw := q != '`' && i > 0 && (src[i-1] == 'r' || src[i-1] == 'R')
	delim := string(q)
	if q != '`' && strings.HasPrefix(src[i:], strings.Repeat(delim, 3)) {
		delim = strings.Repeat(delim, 3)
	}
	for j := i + len(delim); j < len(src); j++ {
		if src[j] == '\\' && !raw {
			j++
			continue
		}
		if strings.HasPrefix(src[j:], delim) {
			return j + len(delim)
		}
	}
	return len(src)
}
