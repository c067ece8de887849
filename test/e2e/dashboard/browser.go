package dashboard

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/chromedp/chromedp"
)

// ChromiumPath is Debian's chromium, which `make test-deps` installs.
const ChromiumPath = "/usr/bin/chromium"

// Browser is one headless Chromium with a fresh profile: its own cookies.
type Browser struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// NewBrowser starts Chromium with a new profile in a directory of dir.
func NewBrowser(ctx context.Context, dir string) (*Browser, error) {
	if _, err := os.Stat(ChromiumPath); err != nil {
		return nil, fmt.Errorf("%s is missing: run `make test-deps` (apt-get install chromium): %w", ChromiumPath, err)
	}
	profile, err := os.MkdirTemp(dir, "chromium-profile-")
	if err != nil {
		return nil, err
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(ChromiumPath),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 820),
	)
	bctx, cancelCtx := chromedp.NewContext(alloc)
	// Start the browser now, so that a missing library fails here.
	if err := chromedp.Do(bctx); err != nil {
		cancelCtx()
		cancelAlloc()
		return nil, fmt.Errorf("starting chromium: %w", err)
	}
	return &Browser{ctx: bctx, cancel: func() { cancelCtx(); cancelAlloc(); _ = os.RemoveAll(profile) }}, nil
}

// Close stops the browser.
func (b *Browser) Close() { b.cancel() }

// Do runs actions in the browser's tab, bounded by timeout.
func (b *Browser) Do(timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	return chromedp.Do(ctx, actions...)
}

// Eval evaluates a JavaScript expression in b's page.
func Eval[T any](b *Browser, expr string) (T, error) {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](expr))
}

// Screenshot takes a PNG of the whole page.
func (b *Browser) Screenshot() ([]byte, error) {
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	return chromedp.Run(ctx, chromedp.FullScreenshot(100))
}
