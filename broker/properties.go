package broker

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// ParseProperties reads the Java properties format (java.util.Properties,
// in which Kafka writes server.properties and meta.properties):
// "key=value", "key: value" or "key value" lines; '#' and '!' start
// comment lines; a line ending in an odd number of backslashes continues
// on the next line (whose leading whitespace is dropped); \t, \n, \r, \f,
// \uXXXX and \<char> escapes are decoded. A key given twice keeps the
// last value, as in Java. Errors name the line.
func ParseProperties(r io.Reader) (map[string]string, error) {
	props := map[string]string{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	lineNo := 0
	for sc.Scan() {
		lineNo++
		start := lineNo
		line := strings.TrimLeft(sc.Text(), " \t\f")
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		for continues(line) {
			line = line[:len(line)-1]
			if !sc.Scan() {
				break
			}
			lineNo++
			line += strings.TrimLeft(sc.Text(), " \t\f")
		}
		k, v, err := splitProperty(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", start, err)
		}
		if k == "" {
			return nil, fmt.Errorf("line %d: empty key", start)
		}
		props[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return props, nil
}

// continues reports whether a line ends in an odd number of backslashes.
func continues(line string) bool {
	n := 0
	for i := len(line) - 1; i >= 0 && line[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

// splitProperty splits a logical line at the first unescaped '=', ':' or
// whitespace, and unescapes both sides.
func splitProperty(line string) (string, string, error) {
	i := 0
	for i < len(line) {
		c := line[i]
		if c == '\\' {
			i += 2
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			break
		}
		i++
	}
	i = min(i, len(line))
	key := line[:i]
	rest := strings.TrimLeft(line[i:], " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	k, err := unescapeProperty(key)
	if err != nil {
		return "", "", err
	}
	v, err := unescapeProperty(rest)
	if err != nil {
		return "", "", err
	}
	return k, v, nil
}

func unescapeProperty(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i == len(s)-1 {
			b.WriteByte(c)
			continue
		}
		i++
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", fmt.Errorf("malformed \\u escape in %q", s)
			}
			n, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", fmt.Errorf("malformed \\u escape in %q", s)
			}
			b.WriteRune(rune(n))
			i += 4
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}

// ReadPropertiesFile reads a file in the Java properties format
// (ParseProperties). An error opening it is returned as is
// (errors.Is(err, fs.ErrNotExist) for a missing file); a syntax error
// names the file and the line.
func ReadPropertiesFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close() // read only: a close error loses nothing
	props, err := ParseProperties(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return props, nil
}
