/**
 * palette.ts: one colour per job on screen, no two alike while they fit the palette, a job keeps its
 * colour from one answer to the next, and text stays readable on each colour.
 */
import {
  JobPalette,
  PALETTE,
  nodeIsDown,
  preferredSlot,
  textOn
} from '../palette';

describe('preferredSlot', () => {
  it("is a job id's number modulo the palette, so consecutive jobs differ", () => {
    expect(preferredSlot('100', 19)).toBe(100 % 19);
    expect(preferredSlot('101', 19)).toBe(101 % 19);
    // an array task's id: the array job's number
    expect(preferredSlot('12_3', 19)).toBe(12);
    // more digits than a double holds exactly
    expect(preferredSlot('123456789012345678901', 19)).toBe(
      Number(123456789012345678901n % 19n)
    );
  });

  it('hashes an id without a number into the palette', () => {
    const slot = preferredSlot('abc', 19);
    expect(slot).toBe(preferredSlot('abc', 19));
    expect(slot).toBeGreaterThanOrEqual(0);
    expect(slot).toBeLessThan(19);
  });
});

describe('JobPalette', () => {
  it('gives jobs whose ids share a slot different colours', () => {
    const palette = new JobPalette();
    const ids = Array.from({ length: 12 }, (_, i) =>
      String(7 + i * PALETTE.length)
    );
    const colours = ids.map(id => palette.colour(id));
    expect(new Set(colours).size).toBe(12);
    // the next free slots of the palette, not colours from past its end
    expect(colours.every(c => PALETTE.includes(c))).toBe(true);
  });

  it('goes past the palette with colours no slot has', () => {
    const palette = new JobPalette();
    const colours = Array.from({ length: 40 }, (_, i) =>
      palette.colour(String(1000 + i))
    );
    expect(new Set(colours).size).toBe(40);
    expect(colours.filter(c => c.startsWith('hsl(')).length).toBe(
      40 - PALETTE.length
    );
  });

  it('keeps a colour while the job is shown and frees it once it goes', () => {
    const palette = new JobPalette();
    const five = palette.colour('5');
    const six = palette.colour('6');
    // 24 prefers the slot of 5 (24 % 19 == 5): it takes the next free one
    expect(palette.colour('24')).not.toBe(five);
    expect([palette.colour('5'), palette.colour('6')]).toEqual([five, six]);
    palette.keep(['6', '24']);
    expect(palette.colour('6')).toBe(six);
    // 43 prefers slot 5 too, free again now that job 5 is gone
    expect(palette.colour('43')).toBe(five);
  });

  it('works with a palette of its own', () => {
    const palette = new JobPalette(['#000000', '#ffffff']);
    expect(['0', '1'].map(id => palette.colour(id))).toEqual([
      '#000000',
      '#ffffff'
    ]);
    expect(palette.slot('2')).toBe(2);
  });
});

describe('nodeIsDown', () => {
  it.each([
    ['DOWN*', true],
    ['IDLE+DRAIN', true],
    ['DOWN+NOT_RESPONDING', true],
    ['MIXED+FAIL', true],
    ['IDLE*', true],
    ['MIXED', false],
    ['IDLE', false],
    ['ALLOCATED', false],
    ['PLANNED', false]
  ])('%s -> %s', (state, down) => {
    expect(nodeIsDown(state)).toBe(down);
  });
});

describe('textOn', () => {
  it('is black on light colours and white on dark ones', () => {
    expect(textOn('#f3c300')).toBe('#000');
    expect(textOn('#0067a5')).toBe('#fff');
  });

  it("falls back to the theme's text colour for colours it cannot read", () => {
    expect(textOn('hsl(10, 45%, 40%)')).toBe('var(--jp-ui-font-color0)');
  });

  it('makes every palette colour readable one way or the other', () => {
    for (const colour of PALETTE) {
      expect(['#000', '#fff']).toContain(textOn(colour));
    }
  });
});
