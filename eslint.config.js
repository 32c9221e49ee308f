import js from '@eslint/js'
import tseslint from 'typescript-eslint'

export default tseslint.config(
  { ignores: ['node_modules/', '.data/'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    // Type-aware rules: every file the tsconfig includes is linted with its types.
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      // Off: knex 3 types every query result as `any`, and so are the JSON bodies and rows the tests
      // read. These five rules flag ~400 such reads (27 in src/, the rest in test/ and bench/) and a cast
      // at each would check nothing more; typing knex's results (row types per query) is its own change.
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      // Off: an async function without await is how our fakes, knex's MigrationSource and the
      // provider interface return a Promise; the declared return type already says what callers get.
      '@typescript-eslint/require-await': 'off',
      'no-console': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
    },
  },
  {
    // The CLI entry points talk to a person at a terminal; everything else logs through winston.
    files: ['src/bin/**/*.ts'],
    rules: { 'no-console': 'off' },
  },
  {
    // The README's client example shows its answers on the terminal.
    files: ['client/example.ts'],
    rules: { 'no-console': 'off' },
  },
  {
    // Browser scripts, this file and the CommonJS reporter are outside the tsconfig: no type information for them.
    files: ['**/*.js', '**/*.cjs'],
    ...tseslint.configs.disableTypeChecked,
  },
  {
    // The operator console and the docs page are plain browser scripts (no bundler, no framework).
    files: ['public/**/*.js'],
    languageOptions: {
      sourceType: 'script',
      globals: {
        window: 'readonly',
        document: 'readonly',
        sessionStorage: 'readonly',
        fetch: 'readonly',
        crypto: 'readonly',
        URLSearchParams: 'readonly',
        Node: 'readonly',
        SwaggerUIBundle: 'readonly',
        console: 'readonly',
      },
    },
  },
  {
    // Mocha loads reporters with require(), so this one file is CommonJS and prints by design.
    files: ['test/support/summary-reporter.cjs'],
    languageOptions: { sourceType: 'commonjs', globals: { require: 'readonly', module: 'writable', console: 'readonly' } },
    rules: { '@typescript-eslint/no-require-imports': 'off', 'no-console': 'off' },
  },
)
