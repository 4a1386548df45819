package main

import (
	"fmt"
	"net"
	"net/url"

	"github.com/go-sql-driver/mysql"

	"github.com/flashsale/platform/internal/stack"
)

// loopbackOnly refuses a stack file that points anywhere but this machine: the
// benchmark sends load, and load goes to 127.0.0.1 only.
func loopbackOnly(st stack.File) error {
	hosts := map[string]string{}
	for name, raw := range map[string]string{"grab": st.Grab, "admin": st.Admin} {
		u, err := url.Parse(raw)
		if err != nil {
			return fmt.Errorf("stack file: %s url %q: %w", name, raw, err)
		}
		hosts[name] = u.Host
	}
	for i, a := range st.Redis {
		hosts[fmt.Sprintf("redis %d", i)] = a
	}
	for i, a := range st.Kafka {
		hosts[fmt.Sprintf("kafka %d", i)] = a
	}
	if cfg, err := mysql.ParseDSN(st.MySQLDSN); err == nil {
		hosts["mysql"] = cfg.Addr
	}
	for name, hp := range hosts {
		if !isLoopback(hp) {
			return fmt.Errorf("stack file: %s is %q, not a loopback address; the benchmark only loads this machine", name, hp)
		}
	}
	return nil
}

func isLoopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
