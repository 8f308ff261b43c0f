package etcdembed

import (
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The settler evaluates a write's compares against the key's history as
// etcd evaluates them when it applies the write: for a missing key and a
// present one, every target and every result, compareHolds agrees with
// what a real transaction decides.
func TestCompareHoldsAsEtcd(t *testing.T) {
	cfg := internalConfig(t, 64<<20)
	srv, err := Start(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ccfg, err := ClientConfig(srv.Endpoints(), cfg.Etcd, cfg.Log)
	if err != nil {
		t.Fatal(err)
	}
	c, err := clientv3.New(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := t.Context()
	if _, err := c.Put(ctx, "present", "b"); err != nil {
		t.Fatal(err)
	}
	put, err := c.Put(ctx, "present", "b")
	if err != nil {
		t.Fatal(err)
	}
	rev := put.Header.Revision
	got, err := c.Get(ctx, "present")
	if err != nil {
		t.Fatal(err)
	}
	state := map[string]*clientv3.GetResponse{"present": got}
	for _, key := range []string{"missing", "present"} {
		var kv *mvccpb.KeyValue
		if resp := state[key]; resp != nil {
			kv = resp.Kvs[0]
		}
		for _, cmp := range []clientv3.Cmp{
			clientv3.Compare(clientv3.Value(key), "=", "b"),
			clientv3.Compare(clientv3.Value(key), "<", "c"),
			clientv3.Compare(clientv3.Value(key), ">", "a"),
			clientv3.Compare(clientv3.Value(key), "!=", ""),
			clientv3.Compare(clientv3.Version(key), "=", 0),
			clientv3.Compare(clientv3.Version(key), "=", 2),
			clientv3.Compare(clientv3.Version(key), ">", 1),
			clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
			clientv3.Compare(clientv3.CreateRevision(key), "<", rev),
			clientv3.Compare(clientv3.ModRevision(key), "=", 0),
			clientv3.Compare(clientv3.ModRevision(key), "=", rev),
			clientv3.Compare(clientv3.ModRevision(key), "!=", rev),
			clientv3.Compare(clientv3.LeaseValue(key), "=", 0),
			clientv3.Compare(clientv3.LeaseValue(key), ">", 0),
		} {
			resp, err := c.Txn(ctx).If(cmp).Commit()
			if err != nil {
				t.Fatal(err)
			}
			pc := cmp.GetCompare()
			if h := compareHolds(pc, kv); h != resp.Succeeded {
				t.Errorf("%s: compareHolds says %v, etcd %v", fmt.Sprint(pc), h, resp.Succeeded)
			}
		}
	}
}
