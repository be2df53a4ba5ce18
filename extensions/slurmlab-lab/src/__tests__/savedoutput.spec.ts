/**
 * savedoutput.ts: what a widget output shows once its widget is gone.
 */
import {
  WIDGET_VIEW_MIMETYPE,
  fallbackMimeType,
  isSlurmlabFallback,
  widgetOutcome,
  withoutWidgetView
} from '../savedoutput';

const VIEW = { model_id: 'abc', version_major: 2, version_minor: 0 };
const SLURMLAB_HTML =
  '<div class="slurmlab-Allocation">allocation 7: RUNNING as of 10:00 · re-run the cell to reconnect</div>';

/** JupyterLab's ranking, roughly: HTML over plain text. */
function preferred(bundle: Record<string, unknown>): string | undefined {
  return ['image/png', 'text/html', 'text/plain'].find(m => m in bundle);
}

describe('isSlurmlabFallback', () => {
  it("knows slurmlab's dated HTML, joined from a list of lines too", () => {
    expect(isSlurmlabFallback({ 'text/html': SLURMLAB_HTML })).toBe(true);
    expect(
      isSlurmlabFallback({
        'text/html': ["<div class='x slurmlab-A'>", 'x</div>']
      })
    ).toBe(true);
    expect(
      isSlurmlabFallback({ 'text/html': '<p>slurmlab-Allocation</p>' })
    ).toBe(false);
    expect(isSlurmlabFallback({ 'text/plain': 'slurmlab' })).toBe(false);
  });
});

describe('fallbackMimeType', () => {
  it("shows slurmlab's HTML in place of the widget", () => {
    const data = {
      [WIDGET_VIEW_MIMETYPE]: VIEW,
      'text/html': SLURMLAB_HTML,
      'text/plain': 'Allocation(7)'
    };
    expect(fallbackMimeType(data, preferred)).toBe('text/html');
    expect(withoutWidgetView(data)).not.toHaveProperty(WIDGET_VIEW_MIMETYPE);
  });

  it("keeps the widget manager's message over a bare repr", () => {
    const data = {
      [WIDGET_VIEW_MIMETYPE]: VIEW,
      'text/plain': 'IntSlider(value=3)'
    };
    expect(fallbackMimeType(data, preferred)).toBeNull();
  });

  it('shows an image a widget saved', () => {
    const data = {
      [WIDGET_VIEW_MIMETYPE]: VIEW,
      'image/png': 'iVBOR',
      'text/plain': 'x'
    };
    expect(fallbackMimeType(data, preferred)).toBe('image/png');
  });

  it('has nothing to show for a bundle that is only the widget', () => {
    expect(
      fallbackMimeType({ [WIDGET_VIEW_MIMETYPE]: VIEW }, preferred)
    ).toBeNull();
    expect(
      fallbackMimeType(
        { [WIDGET_VIEW_MIMETYPE]: VIEW, 'x/y': 1 },
        () => undefined
      )
    ).toBeNull();
  });
});

describe('widgetOutcome', () => {
  it('tells a live widget, a failed one and one still loading apart', () => {
    expect(widgetOutcome(1, '')).toBe('widget');
    expect(widgetOutcome(0, 'Error displaying widget: model not found')).toBe(
      'failed'
    );
    expect(widgetOutcome(0, 'Loading widget...')).toBe('pending');
    expect(widgetOutcome(0, null)).toBe('pending');
  });
});
