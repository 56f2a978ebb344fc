package server

import (
	"bufio"
	"io"
	"net"
	"testing"
)

// A registered command goes through dispatch like a built-in one: arity
// check, the caller's keyspace, replies in both protocols, COMMAND INFO.
func init() {
	Register(Command{
		Name: "x.apitest", Arity: -2, Flags: "write fast", FirstKey: 1, LastKey: 1, Step: 1,
		ACL: "write fast", Group: "generic", Since: "1.0.0", Summary: "Test of the handler API.",
		Run: func(x *Ctx) {
			n := int64(x.Store().Len())
			x.Array(4)
			x.Int(n)
			x.BulkString(string(x.Args()[1]))
			x.Null()
			x.Double(1.5)
		},
	})
}

func TestRegisteredCommandDispatches(t *testing.T) {
	_, addr := startServer(t, nil)
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	rd := bufio.NewReader(nc)
	for _, step := range []struct{ send, want string }{
		{"X.APITEST\r\n", "-ERR wrong number of arguments for 'x.apitest' command\r\n"},
		{"X.APITEST k\r\n", "*4\r\n:0\r\n$1\r\nk\r\n$-1\r\n$3\r\n1.5\r\n"},
		{"HELLO 3\r\n", ""},
		{"x.apitest k\r\n", "*4\r\n:0\r\n$1\r\nk\r\n_\r\n,1.5\r\n"},
	} {
		if _, err := nc.Write([]byte(step.send)); err != nil {
			t.Fatal(err)
		}
		if step.want == "" {
			if _, err := readResp3(rd); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got := make([]byte, len(step.want))
		if _, err := io.ReadFull(rd, got); err != nil {
			t.Fatalf("%q: %v (got %q)", step.send, err, got)
		}
		if string(got) != step.want {
			t.Fatalf("%q: got %q want %q", step.send, got, step.want)
		}
	}
}

func TestRegisterRefusesDuplicate(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("registering x.apitest twice did not panic")
		}
	}()
	Register(Command{Name: "x.apitest", Arity: 1, Run: func(*Ctx) {}})
}
