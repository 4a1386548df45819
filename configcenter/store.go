package configcenter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients/config_client"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
)

// Document is one version of the switches document as a store holds it.
type Document struct {
	Content []byte
	MD5     string // "" when the store holds no document
}

// ErrConflict means the document changed after it was read: someone else
// published first. Nothing was written; read again and decide again.
var ErrConflict = errors.New("switches document changed since it was read; nothing written")

// Store is where on-call tools read and publish the switches document. Publish
// is a compare-and-set, so two engineers never overwrite each other blindly.
type Store interface {
	Get(ctx context.Context) (Document, error)
	// Publish writes content only if the store still holds version casMD5
	// ("" meaning no document yet); otherwise it returns ErrConflict.
	Publish(ctx context.Context, content []byte, casMD5 string) error
	Describe() string
	Close() error
}

func docOf(content []byte) Document {
	if len(content) == 0 {
		return Document{}
	}
	return Document{Content: content, MD5: md5Hex(content)}
}

// FileStore is the switches file of the local stack.
type FileStore struct{ Path string }

// Describe implements Store.
func (f FileStore) Describe() string { return "file:" + f.Path }

// Close implements Store.
func (f FileStore) Close() error { return nil }

// Get implements Store; a missing file is an empty document.
func (f FileStore) Get(context.Context) (Document, error) {
	b, err := os.ReadFile(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return Document{}, nil
	}
	if err != nil {
		return Document{}, fmt.Errorf("read %s: %w", f.Path, err)
	}
	return docOf(b), nil
}

// Publish implements Store. Writers on one machine take an exclusive lock on
// PATH.lock, check the md5, and replace the file by rename, so the watcher never
// reads half a document and a concurrent writer cannot slip in between.
func (f FileStore) Publish(ctx context.Context, content []byte, casMD5 string) error {
	lock, err := os.OpenFile(f.Path+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("lock %s: %w", f.Path, err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock %s: %w", f.Path, err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing the file unlocks too
	cur, err := f.Get(ctx)
	if err != nil {
		return err
	}
	if cur.MD5 != casMD5 {
		return ErrConflict
	}
	dir, base := filepath.Split(f.Path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", f.Path, err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing left to remove
	_, err = tmp.Write(content)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), f.Path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", f.Path, err)
	}
	if d, err := os.Open(dir); err == nil { // make the rename itself durable
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// NacosStore is the switches document in Nacos.
type NacosStore struct {
	client config_client.IConfigClient
	cfg    NacosConfig
}

// NewNacosStore connects a store to the document cfg names.
func NewNacosStore(cfg NacosConfig) (*NacosStore, error) {
	cfg = cfg.withDefaults()
	c, err := NewNacosClient(cfg)
	if err != nil {
		return nil, err
	}
	return &NacosStore{client: c, cfg: cfg}, nil
}

// Describe implements Store.
func (n *NacosStore) Describe() string {
	return fmt.Sprintf("nacos://%s/%s/%s/%s", n.cfg.Addr, n.cfg.Namespace, n.cfg.Group, n.cfg.DataID)
}

// Close implements Store.
func (n *NacosStore) Close() error {
	n.client.CloseClient()
	return nil
}

// Get implements Store. Nacos's md5 is the md5 of the content, so it is computed here.
func (n *NacosStore) Get(ctx context.Context) (Document, error) {
	for {
		content, err := n.client.GetConfig(vo.ConfigParam{DataId: n.cfg.DataID, Group: n.cfg.Group})
		if err == nil {
			return docOf([]byte(content)), nil
		}
		// The SDK allows 5 reads of one key a second per process and fails the
		// rest at once; a tool reading in a loop waits for the next slot.
		if !strings.Contains(err.Error(), "ConfigQueryRequest is limited") {
			return Document{}, fmt.Errorf("get %s: %w", n.Describe(), err)
		}
		select {
		case <-ctx.Done():
			return Document{}, fmt.Errorf("get %s: %w", n.Describe(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Publish implements Store with ConfigPublish's casMd5. Nacos cannot publish
// "only if absent" (an empty casMd5 means no check), so creating the first
// version checks for absence just before publishing: the one window left.
func (n *NacosStore) Publish(ctx context.Context, content []byte, casMD5 string) error {
	if len(bytes.TrimSpace(content)) == 0 {
		return errors.New("publish: empty document")
	}
	if casMD5 == "" {
		cur, err := n.Get(ctx)
		if err != nil {
			return err
		}
		if cur.MD5 != "" {
			return ErrConflict
		}
	}
	ok, err := n.client.PublishConfig(vo.ConfigParam{DataId: n.cfg.DataID, Group: n.cfg.Group, Content: string(content), CasMd5: casMD5, Type: "json"})
	if err == nil && ok {
		return nil
	}
	// A failed CAS comes back as a plain error message; tell it apart by reading
	// the version now in force. Ours in force means an answer lost on the way back.
	if cur, gerr := n.Get(ctx); gerr == nil {
		switch cur.MD5 {
		case md5Hex(content):
			return nil
		case casMD5:
		default:
			return ErrConflict
		}
	}
	if err == nil {
		err = errors.New("server refused the publish")
	}
	return fmt.Errorf("publish %s: %w", n.Describe(), err)
}
