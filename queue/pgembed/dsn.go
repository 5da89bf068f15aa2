package pgembed

import (
	"net/url"
	"strings"
)

// SplitPassword takes the password out of a connection string, URL (user:password@, or a
// password parameter) or keyword/value form; the rest is unchanged.
func SplitPassword(dsn string) (rest, password string) {
	if u, err := url.Parse(dsn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		if p, ok := u.User.Password(); ok {
			password = p
			u.User = url.User(u.User.Username())
		}
		if q := u.Query(); q.Has("password") {
			password = q.Get("password")
			q.Del("password")
			u.RawQuery = q.Encode()
		}
		if password == "" {
			return dsn, ""
		}
		return u.String(), password
	}
	// Keyword/value: key = value pairs, a value bare or single-quoted with backslash escapes;
	// the last password wins, as in libpq.
	var kept []string
	for s := strings.TrimSpace(dsn); s != ""; s = strings.TrimSpace(s) {
		key, after, ok := strings.Cut(s, "=")
		if !ok {
			return dsn, "" // not a connection string psql would take either: left as it is
		}
		key, after = strings.TrimSpace(key), strings.TrimLeft(after, " \t\n")
		var value strings.Builder
		n := 0
		if strings.HasPrefix(after, "'") {
			for n = 1; n < len(after) && after[n] != '\''; n++ {
				if after[n] == '\\' && n+1 < len(after) {
					n++
				}
				value.WriteByte(after[n])
			}
			n++ // the closing quote
		} else {
			for n < len(after) && !strings.ContainsRune(" \t\n", rune(after[n])) {
				n++
			}
			value.WriteString(after[:n])
		}
		n = min(n, len(after))
		if key == "password" {
			password = value.String()
		} else {
			kept = append(kept, key+"="+after[:n])
		}
		s = after[n:]
	}
	return strings.Join(kept, " "), password
}
