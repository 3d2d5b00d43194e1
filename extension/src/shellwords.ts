// A command line typed by the user, split into the program and its arguments the way a POSIX shell
// splits words: blanks separate words; '...' keeps everything literally; "..." keeps everything but
// \" \\ \$ \` (escaped); a backslash outside quotes escapes the next character. Nothing is expanded
// (no $VARS, globs or ~) and no shell runs it, so shell operators are refused rather than passed to
// the program as arguments.

export type Split = { argv: string[] } | { error: string };

const OPERATORS = new Set(["|", "&", ";", "<", ">", "(", ")", "`"]);
const DOUBLE_ESCAPES = new Set(['"', "\\", "$", "`", "\n"]);

export function shellWords(line: string): Split {
  const argv: string[] = [];
  let word: string | undefined; // undefined: between words ('' is an empty quoted word)
  let i = 0;
  while (i < line.length) {
    const c = line[i];
    if (c === " " || c === "\t" || c === "\n") {
      if (word !== undefined) {
        argv.push(word);
        word = undefined;
      }
      i += 1;
    } else if (c === "'") {
      const end = line.indexOf("'", i + 1);
      if (end < 0) {
        return { error: "a ' is not closed" };
      }
      word = (word ?? "") + line.slice(i + 1, end);
      i = end + 1;
    } else if (c === '"') {
      let text = "";
      i += 1;
      while (i < line.length && line[i] !== '"') {
        if (line[i] === "\\" && i + 1 < line.length && DOUBLE_ESCAPES.has(line[i + 1])) {
          text += line[i + 1] === "\n" ? "" : line[i + 1];
          i += 2;
        } else {
          text += line[i];
          i += 1;
        }
      }
      if (i >= line.length) {
        return { error: 'a " is not closed' };
      }
      word = (word ?? "") + text;
      i += 1;
    } else if (c === "\\") {
      if (i + 1 >= line.length) {
        return { error: "the line ends with a \\" };
      }
      word = (word ?? "") + (line[i + 1] === "\n" ? "" : line[i + 1]);
      i += 2;
    } else if (OPERATORS.has(c)) {
      return { error: `${c} is a shell operator: the command runs without a shell (quote it, or put the pipeline in a script)` };
    } else {
      word = (word ?? "") + c;
      i += 1;
    }
  }
  if (word !== undefined) {
    argv.push(word);
  }
  return argv.length ? { argv } : { error: "no program given" };
}
