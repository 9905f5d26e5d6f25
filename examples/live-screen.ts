/**
 * Drawing the demo's live view on a terminal in place, without flicker: every frame moves the cursor home and
 * overwrites the lines of the last one, clearing what is left of each line and what is left below, in one write (no
 * full-screen clear between frames). The cursor is hidden while the view is drawn and shown again when it ends.
 *
 * Source: extension (ECMA-48 control sequences: CUP `ESC [ H`, EL `ESC [ K`, ED `ESC [ 2 J` / `ESC [ J`, and the
 * DEC private mode 25 `ESC [ ? 25 l` / `h` that hides and shows the cursor).
 */

/** Hides the cursor. */
export const HIDE_CURSOR = '\x1b[?25l';
/** Shows the cursor. */
export const SHOW_CURSOR = '\x1b[?25h';
/** Moves the cursor to the top left corner. */
export const CURSOR_HOME = '\x1b[H';
/** Clears from the cursor to the end of its line. */
export const CLEAR_LINE_END = '\x1b[K';
/** Clears from the cursor to the end of the screen. */
export const CLEAR_SCREEN_END = '\x1b[J';
/** Clears the whole screen. */
export const CLEAR_SCREEN = '\x1b[2J';

/** What starts the view: hide the cursor and clear the screen once. */
export function enterScreen(): string {
  return `${HIDE_CURSOR}${CLEAR_SCREEN}${CURSOR_HOME}`;
}

/**
 * One frame: cursor home, then each line followed by a clear to the end of that line, lines separated by CR LF, then
 * a clear to the end of the screen (for the lines of a longer previous frame). Lines must be narrower than the
 * terminal (see `renderLiveView`), so no line wraps; the cursor stays at the end of the last line.
 */
export function frame(lines: readonly string[]): string {
  return `${CURSOR_HOME}${lines.map((line) => `${line}${CLEAR_LINE_END}`).join('\r\n')}${CLEAR_SCREEN_END}`;
}

/** What ends the view: the cursor below the last frame, at column 0, and shown again. */
export function leaveScreen(): string {
  return `\r\n${SHOW_CURSOR}`;
}
